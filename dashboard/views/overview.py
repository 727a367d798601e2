"""Sweeps overview: counts by state and progress for every sweep, and every live run's step,
last loss, tokens/s, ETA and heartbeat age (db.live_runs), refreshed while runs are live."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import data
from dashboard.mdtext import md
from dashboard.status import status_table
from dashboard.views.common import (
    LIVE_REFRESH_S,
    is_active,
    refresh_s,
    table_height,
    watch,
)

STALE_HEARTBEAT_S = 60  # a heartbeat older than this is shown as a warning


def live_table(live: pl.DataFrame) -> pl.DataFrame:
    """db.live_runs as the page shows it: progress as step / total, ETA and heartbeat age in
    words."""
    def dur(s: float | None) -> str:
        if s is None:
            return "–"
        s = int(s)
        return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else \
            (f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s")

    rows = []
    for r in live.iter_rows(named=True):
        step = "–" if r["step"] is None else \
            f"{r['step']}/{r['steps_total']}" if r["steps_total"] else str(r["step"])
        rows.append({"run": r["name"], "sweep": r["sweep"], "variant": r["variant"],
                     "status": r["status"], "step": step,
                     "progress": (r["step"] or 0) / r["steps_total"] if r["steps_total"] else 0.0,
                     "last loss": "–" if r["last_loss"] is None else f"{r['last_loss']:.4f}",
                     "tokens/s": "–" if r["tokens_per_s"] is None
                     else f"{r['tokens_per_s']:,.0f}",
                     "ETA": dur(r["eta_s"]), "heartbeat age": dur(r["heartbeat_age_s"])})
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={"run": pl.String})


def render(url: str, sweep: str | None) -> None:
    st.header("Sweeps")
    table = status_table(data.sweep_status(url))
    if table.is_empty():
        st.info(f"No sweeps in {url} yet: run `orchestrator submit sweeps/gates.yaml`.")
        return
    # the watcher reruns the page whenever any sweep's counts change (a new sweep, a run
    # that starts or ends), also when nothing was live at load; the block below refreshes
    # itself too: every LIVE_REFRESH_S while runs are active (steps, losses and heartbeats
    # move between changes), every GATESWEEP_DASHBOARD_IDLE_S when idle (it had no clock then,
    # and a live table read just before the last run ended stayed on the page for good)
    watch(url, None, "ov")
    active = is_active(url, None)
    every = refresh_s(active)
    st.fragment(run_every=every)(_status_block)(url, active)


def _status_block(url: str, active: bool = False) -> None:
    table = status_table(data.sweep_status(url))
    st.dataframe(
        table, hide_index=True, width="stretch", key="ov_sweeps",
        height=table_height(table.height),
        column_config={"progress": st.column_config.ProgressColumn(
            "progress", help="finished runs / all runs", min_value=0.0, max_value=1.0,
            format="percent")})
    live = data.live_runs(url, None)
    st.subheader(f"Live runs ({live.height})")
    if live.is_empty():
        st.caption("No run is pending, running or lost.")
        return
    stale = live.filter(pl.col("heartbeat_age_s") > STALE_HEARTBEAT_S)
    if stale.height:
        st.warning(f"{stale.height} running run(s) have not sent a heartbeat for more than "
                   f"{STALE_HEARTBEAT_S} s: {', '.join(md(n) for n in stale['name'].head(5))}.")
    st.dataframe(live_table(live), hide_index=True, width="stretch", key="ov_live",
                 height=table_height(live.height),
                 column_config={"progress": st.column_config.ProgressColumn(
                     "progress", min_value=0.0, max_value=1.0, format="percent")})
    if active:
        st.caption(f"Refreshed every {LIVE_REFRESH_S} s while runs are active.")
