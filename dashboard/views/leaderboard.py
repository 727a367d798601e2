"""Leaderboard: variants ranked by a chosen metric, mean ± std and n over seeds, delta vs the
sweep's baseline, the gate dimensions as columns, filters by dimension and state."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import data
from dashboard.labels import FILTER_COLUMNS
from dashboard.status import STATES
from dashboard.views.common import show_rows
from dashboard.tables import VAL_PPL, add_row_labels, apply_filters, fmt_delta, fmt_mean_std

_NOT_BETTER = ("bench/",)  # benchmark accuracies: higher is better


def default_ascending(metric: str) -> bool:
    """PPL/loss-like metrics rank lowest first; benchmark accuracies highest first."""
    return not metric.startswith(_NOT_BETTER)


def display_frame(board: pl.DataFrame) -> pl.DataFrame:
    """The ranked frame as the strings shown on the page (and checked by the tests)."""
    # gate dims always; other dims (lr, heads, experts) only where they vary
    dims = [c for c in FILTER_COLUMNS if c in board.columns
            and (c.startswith("gate_") or board[c].cast(pl.String).n_unique() > 1)]
    rows = []
    for r in board.iter_rows(named=True):
        row = {"rank": "" if r["rank"] is None else str(r["rank"]),
               "variant": r["row"] + (" (baseline)" if r["is_baseline"] else ""),
               "mean ± std": fmt_mean_std(r["mean"], r["std"]), "n": str(r["n"]),
               "Δ vs baseline": fmt_delta(r["delta"], r["delta_pct"])}
        row.update({c: "–" if r[c] is None else str(r[c]) for c in dims})
        rows.append(row)
    return pl.DataFrame(rows) if rows else pl.DataFrame(schema={"variant": pl.String})


def _filters(runs: pl.DataFrame) -> dict[str, list[str]]:
    """One multiselect per dimension that varies in this sweep."""
    chosen: dict[str, list[str]] = {}
    dims = [c for c in FILTER_COLUMNS if c in runs.columns
            and runs[c].cast(pl.String).n_unique() > 1]
    if not dims:
        return chosen
    cols = st.columns(min(len(dims), 4))
    for i, col in enumerate(dims):
        options = sorted(runs[col].cast(pl.String).fill_null("–").unique().to_list())
        chosen[col] = cols[i % len(cols)].multiselect(col, options, key=f"lb_f_{col}")
    return chosen


def render(url: str, sweep: str | None) -> None:
    st.header(f"Leaderboard — {sweep}")
    runs = data.runs(url, sweep)
    names = data.summary_names(url, sweep) or [VAL_PPL]
    c1, c2, c3 = st.columns([2, 1, 3])
    metric = c1.selectbox("Metric", names, index=names.index(VAL_PPL) if VAL_PPL in names else 0,
                          key="lb_metric")
    # keyed per metric: each metric keeps its own direction, defaulting to the natural one
    ascending = c2.toggle("Lower is better", value=default_ascending(metric),
                          key=f"lb_asc_{metric}")
    states = c3.multiselect("Run states", list(STATES), default=["succeeded"], key="lb_states")
    with st.expander("Filter by gate dimension"):
        filters = _filters(runs)
    shown = apply_filters(add_row_labels(runs), filters)
    board = data.leaderboard(url, sweep, metric, ascending, tuple(states or ["succeeded"]))
    board = board.filter(pl.col("row").is_in(shown["row"].unique().to_list())) \
        if "row" in board.columns and not shown.is_empty() else board.head(0)
    if board.is_empty():
        st.info("No run of this sweep has this metric yet in the chosen states.")
        return
    base = board.filter(pl.col("is_baseline"))
    st.caption(f"{metric} over seeds; baseline: "
               f"{base['row'][0] if not base.is_empty() else 'none in view'}")
    st.table(display_frame(board.head(show_rows(board.height, "lb_limit"))))

