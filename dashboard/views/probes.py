"""Probes: first-token attention and max activation per layer (baseline vs gated), gate-score
histograms -- the pictures that explain the ablation table."""

from __future__ import annotations

import polars as pl
import streamlit as st

from dashboard import charts, data
from dashboard.tables import FIRST_ATTN, GATE_SCORE, MAX_ACT, add_row_labels, variant_order

PER_LAYER: dict[str, str] = {FIRST_ATTN: "first-token attention (attention sink)",
                             MAX_ACT: "max |activation| (massive activations)",
                             GATE_SCORE: "mean gate score"}


def per_layer_frame(runs: pl.DataFrame, summaries: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(row, layer, value): the seed-mean of ``<metric>/layer_i`` per variant row and layer."""
    if summaries.is_empty():
        return pl.DataFrame(schema={"row": pl.String, "layer": pl.Int64, "value": pl.Float64})
    prefix = f"{metric}/layer_"
    long = summaries.filter(pl.col("name").str.starts_with(prefix)).with_columns(
        layer=pl.col("name").str.slice(len(prefix)).cast(pl.Int64, strict=False))
    rows = add_row_labels(runs).filter(pl.col("status") == "succeeded").select("id", "row")
    joined = long.join(rows, left_on="run_id", right_on="id", how="inner")
    return (joined.group_by("row", "layer").agg(pl.col("value").mean())
            .drop_nulls("layer").sort("row", "layer"))


def _histograms(url: str, run_ids: list[int], names: dict[int, str]) -> None:
    hists = []
    for rid in run_ids:
        detail = data.run_detail(url, rid)
        arts = detail["artifacts"] if detail else pl.DataFrame()
        if arts.is_empty() or "kind" not in arts.columns:
            continue
        found = arts.filter(pl.col("kind") == "gate_histogram")
        if found.is_empty():
            continue
        # the last evaluation's histogram, all layers pooled
        hists += charts.combine_layers(charts.parse_histogram(found["data"][-1]), names[rid])
    if hists:
        st.altair_chart(charts.histogram(hists), width="stretch")
    else:
        st.caption("No gate_histogram artifact for these runs (ungated runs have none).")


def render(url: str, sweep: str | None) -> None:
    st.header(f"Probes — {sweep}")
    runs = data.runs(url, sweep)
    layer_names = [n for n in data.summary_names(url, sweep)
                   if charts.layer_index(n) is not None and n.rsplit("/", 1)[0] in PER_LAYER]
    summaries = data.summaries(url, sweep, tuple(layer_names))
    order = variant_order(runs) if not runs.is_empty() else []
    picked = st.multiselect("Variants", order, default=order[:8], key="pr_rows")
    for metric, title in PER_LAYER.items():
        frame = per_layer_frame(runs, summaries, metric).filter(pl.col("row").is_in(picked))
        st.subheader(title)
        if frame.is_empty():
            st.caption(f"No `{metric}/layer_i` summaries for these variants.")
            continue
        st.altair_chart(charts.per_layer(frame, metric), width="stretch")
    st.subheader("Gate score histograms")
    rows = add_row_labels(runs).filter(pl.col("row").is_in(picked)
                                       & pl.col("gate_position").is_not_null())
    ids = rows.sort("id").group_by("row", maintain_order=True).first()["id"].to_list()
    _histograms(url, ids, dict(zip(rows["id"].to_list(), rows["row"].to_list(), strict=True)))
