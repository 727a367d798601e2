"""Run detail: config and its diff against the baseline's, attempts with errors and tracebacks,
and the rerun button (the dashboard's one write, through the orchestrator's rerun path)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl
import streamlit as st

from dashboard import data
from dashboard.configdiff import config_diff
from dashboard.tables import baseline_variant, fmt_num

RERUNNABLE = ("succeeded", "failed", "diverged", "cancelled", "lost")


def _pick_run(runs: pl.DataFrame) -> int:
    ids = runs.sort("id")["id"].to_list()
    labels = {r["id"]: f"{r['id']} · {r['name']} · {r['status']}"
              for r in runs.iter_rows(named=True)}
    wanted = st.query_params.get("run")
    index = ids.index(int(wanted)) if wanted and wanted.isdigit() and int(wanted) in ids else 0
    return st.selectbox("Run", ids, index=index, format_func=labels.__getitem__, key="rd_run")


def _baseline_id(runs: pl.DataFrame, seed: int) -> int | None:
    """The baseline run with the same seed (else the first baseline run)."""
    base = baseline_variant(runs)
    cands = runs.filter(pl.col("variant") == base).sort("id") if base else runs.head(0)
    same = cands.filter(pl.col("seed") == seed)
    pick = same if not same.is_empty() else cands
    return None if pick.is_empty() else int(pick["id"][0])


def _attempts(attempts: list[Any]) -> None:
    st.subheader(f"Attempts ({len(attempts)})")
    if not attempts:
        st.caption("Not started yet.")
        return
    st.table(pl.DataFrame([{"attempt": a.number, "status": a.status, "host": a.host,
                            "started": str(a.started)[:19], "ended": str(a.ended or "")[:19],
                            "error": a.error or ""} for a in attempts]))
    for a in attempts:
        if a.traceback or a.error:
            with st.expander(f"attempt {a.number}: {a.status} — {(a.error or '')[:80]}"):
                st.code(a.traceback or a.error, language="python")


def _rerun_button(url: str, run: Any) -> None:
    """Start `orchestrator rerun ID --db URL` detached (the CLI's own code path)."""
    allowed = run.status in RERUNNABLE
    clicked = st.button("Rerun this run", key="rd_rerun", disabled=not allowed, type="primary",
                        help="new attempt; resumes from the run's last checkpoint" if allowed
                        else f"a {run.status} run is already scheduled")
    if not clicked:
        return
    try:
        from orchestrator.rerun import spawn_rerun  # lazy: the dashboard stays Ray-free
    except ImportError as exc:
        st.error(f"Rerun is unavailable: orchestrator.rerun.spawn_rerun not importable ({exc}).")
        return
    try:
        spawn_rerun(url, run.id)
    except Exception as exc:  # noqa: BLE001 - shown to the user, who can use the CLI instead
        st.error(f"Rerun of run {run.id} failed to start: {exc}. "
                 f"Try `orchestrator rerun {run.id} --db {url}`.")
        return
    data.clear()
    st.success(f"Rerun of run {run.id} ({run.name}) started.")


def _summaries(url: str, run_id: int) -> None:
    mine = data.run_summaries(url, run_id)
    with st.expander(f"Final values ({mine.height})", expanded=False):
        if mine.is_empty():
            st.caption("No summaries yet (the run reports them when it ends).")
        else:
            st.table(mine.with_columns(pl.col("value").map_elements(
                fmt_num, return_dtype=pl.String)))


def render(url: str, sweep: str | None) -> None:
    st.header(f"Run detail — {sweep}")
    runs = data.runs(url, sweep)
    if runs.is_empty():
        st.info("This sweep has no runs.")
        return
    run_id = _pick_run(runs)
    detail = data.run_detail(url, run_id)
    if detail is None:
        st.error(f"Run {run_id} is not in {url}.")
        return
    run = detail["run"]
    st.markdown(f"**{run.name}** — variant `{run.variant}`, seed {run.seed}, "
                f"status **{run.status}**")
    _rerun_button(url, run)
    _attempts(detail["attempts"])
    _summaries(url, run.id)
    st.subheader("Config")
    base_id = _baseline_id(runs, run.seed)
    if base_id is not None and base_id != run.id:
        base_cfg = data.run_config(url, base_id) or {}
        diff = config_diff(run.config, base_cfg)
        st.caption(f"Differences from baseline run {base_id}:")
        st.table(pl.DataFrame(diff, schema=["key", "this run", "baseline"], orient="row")
                 if diff else pl.DataFrame({"key": ["(identical apart from name/seed)"]}))
    with st.expander("Full config (JSON)"):
        st.code(json.dumps(run.config, indent=2, sort_keys=True), language="json")
