"""Sweeps overview: counts by state and progress for every sweep, refreshed while runs are live."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import data
from dashboard.status import LIVE_STATES, status_table

REFRESH_S = 5


def render(url: str, sweep: str | None) -> None:
    st.header("Sweeps")
    table = status_table(data.sweep_status(url))
    if table.is_empty():
        st.info(f"No sweeps in {url} yet: run `orchestrator submit sweeps/gates.yaml`.")
        return
    live = int(table.select(pl.sum_horizontal(list(LIVE_STATES)).sum()).item())
    auto = st.toggle("Auto-refresh while runs are live", value=live > 0, key="auto_refresh")
    # run_every is fixed when the fragment is defined, so it is built per render
    fragment = st.fragment(run_every=REFRESH_S if auto else None)(_status_block)
    fragment(url)


def _status_block(url: str) -> None:
    table = status_table(data.sweep_status(url))
    st.dataframe(
        table, hide_index=True, width="stretch",
        column_config={"progress": st.column_config.ProgressColumn(
            "progress", help="finished runs / all runs", min_value=0.0, max_value=1.0,
            format="percent")})
    live = table.select(pl.sum_horizontal(list(LIVE_STATES)).sum()).item()
    st.caption(f"{live} run(s) live (pending or running); refreshed every {REFRESH_S} s "
               "while live.")
