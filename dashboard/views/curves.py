"""Training curves of selected runs overlaid, loss spikes marked; points are downsampled in the
DB (db.metrics(max_points=...)) so 100 runs x 100k steps stay responsive."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import charts, data

CURVES: dict[str, str] = {"train/loss": "loss", "val/loss": "validation loss",
                          "train/lr": "learning rate", "train/grad_norm": "grad norm"}
MAX_RUNS = 100
DEFAULT_RUNS = 6


def _run_labels(runs: pl.DataFrame) -> dict[int, str]:
    return {r["id"]: f"{r['id']} · {r['name']} · {r['status']}"
            for r in runs.sort("id").iter_rows(named=True)}


def render(url: str, sweep: str | None) -> None:
    st.header(f"Curves — {sweep}")
    runs = data.runs(url, sweep)
    labels = _run_labels(runs)
    if not labels:
        st.info("This sweep has no runs.")
        return
    c1, c2 = st.columns([4, 1])
    picked = c1.multiselect("Runs", list(labels), default=list(labels)[:DEFAULT_RUNS],
                            format_func=labels.__getitem__, max_selections=MAX_RUNS,
                            key="cv_runs")
    points = c2.select_slider("Points per curve", [250, 500, 1000, 2000, 5000], value=1000,
                              key="cv_points")
    names = st.multiselect("Metrics", list(CURVES), default=["train/loss", "train/lr",
                                                             "train/grad_norm"], key="cv_names")
    if not picked or not names:
        st.info("Pick at least one run and one metric.")
        return
    frame = data.metrics(url, tuple(sorted(picked)), tuple(names), points)
    names_by_id = dict(zip(runs["id"].to_list(), runs["name"].to_list(), strict=True))
    frame = frame.with_columns(run=pl.col("run_id").replace_strict(names_by_id,
                                                                   return_dtype=pl.String))
    for name in names:
        series = frame.filter(pl.col("name") == name).select("run", "step", "value")
        if series.is_empty():
            st.caption(f"{name}: no points yet.")
            continue
        spikes = charts.mark_spikes(series) if name == "train/loss" else None
        title = CURVES[name] + (f" — {len(spikes)} spike(s) marked" if spikes is not None else "")
        st.subheader(title)
        st.altair_chart(charts.curves(series, name, spikes=spikes), width="stretch")
