"""Probes: first-token attention, max activation (log scale) and mean gate score per layer, the
seed mean with error bars over seeds, and the gate-score histograms as small multiples -- in
the app's one-colour-per-variant palette. The pictures that explain the ablation table."""

from __future__ import annotations

import polars as pl
import streamlit as st

from contract.metrics import FIRST_TOKEN_ATTENTION, GATE_SCORE_MEAN, MAX_ACTIVATION, VAL_PPL
from contract.states import RunStatus
from dashboard import charts, data, palette
from dashboard.mdtext import md
from dashboard.tables import fmt_lr, row_labels
from dashboard.views.common import show_chart, watch
from results_db.schema.vocab import RESULT_STATES

PER_LAYER: dict[str, str] = {FIRST_TOKEN_ATTENTION: "first-token attention (attention sink)",
                             MAX_ACTIVATION: "max |activation| (massive activations, log scale)",
                             GATE_SCORE_MEAN: "mean gate score"}
LOG_SCALE = (MAX_ACTIVATION,)  # a 120k line must not flatten the ~1k ones


MAX_DEFAULT = 30  # rows drawn by default (all of a 16-variant sweep); more are picked by hand
STACK_ABOVE = 6  # more rows than this: one full-width chart per probe, not three side by side


def run_rows(runs: pl.DataFrame) -> pl.DataFrame:
    """(id, variant, row, lr) of the succeeded runs: row = variant (+ '@ lr=..' when several),
    lr as text ('3e-3') for the LR dash."""
    ok = runs.filter(pl.col("status") == RunStatus.SUCCEEDED)
    return ok.with_columns(row_labels(ok)).select(
        "id", "variant", "row", pl.col("lr").map_elements(fmt_lr, return_dtype=pl.String))


def default_rows(order: list[str], ranked: list[str]) -> list[str]:
    """The rows drawn by default: the leaderboard's order (its best rows first, so its top
    row is never the one left out), then the rest, up to MAX_DEFAULT."""
    first = [r for r in ranked if r in order]
    return (first + [r for r in order if r not in first])[:MAX_DEFAULT]


def per_layer_frame(runs: pl.DataFrame, summaries: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(variant, row, layer, mean, lo, hi, n): per variant row and layer, the mean of
    ``<metric>/layer_i`` over seeds, lo/hi = mean ± std (one seed: no bar)."""
    schema = {"variant": pl.String, "row": pl.String, "lr": pl.String, "layer": pl.Int64,
              "mean": pl.Float64, "lo": pl.Float64, "hi": pl.Float64, "n": pl.UInt32}
    if summaries.is_empty():
        return pl.DataFrame(schema=schema)
    prefix = f"{metric}/layer_"
    long = summaries.filter(pl.col("name").str.starts_with(prefix)).with_columns(
        layer=pl.col("name").str.slice(len(prefix)).cast(pl.Int64, strict=False))
    joined = long.join(run_rows(runs), left_on="run_id", right_on="id", how="inner")
    out = (joined.drop_nulls("layer").drop_nulls("value")
           .group_by("variant", "row", "lr", "layer")
           .agg(pl.col("value").mean().alias("mean"), pl.col("value").std().alias("std"),
                pl.len().alias("n").cast(pl.UInt32)))
    std = pl.col("std").fill_null(0.0)
    return out.with_columns(lo=pl.col("mean") - std, hi=pl.col("mean") + std) \
        .select(list(schema)).sort("row", "layer")


def _histograms(url: str, runs: pl.DataFrame, picked: list[str], colors: dict[str, str]) -> None:
    rows = run_rows(runs).filter(pl.col("row").is_in(picked))
    gated = runs.filter(pl.col("gate_position").is_not_null())["id"].to_list()
    first = rows.filter(pl.col("id").is_in(gated)).sort("id").group_by(
        "row", maintain_order=True).first()
    bars = []
    for rid, variant, row in first.select("id", "variant", "row").iter_rows():
        detail = data.run_detail(url, rid)
        arts = detail["artifacts"] if detail else pl.DataFrame()
        if arts.is_empty() or "kind" not in arts.columns:
            continue
        found = arts.filter(pl.col("kind") == "gate_histogram")
        if found.is_empty():
            continue
        # the last evaluation's histogram, all layers pooled into fractions
        for _, edges, fracs in charts.combine_layers(charts.parse_histogram(found["data"][-1]),
                                                     row):
            bars += [{"variant": variant, "row": row, "lo": edges[i], "hi": edges[i + 1],
                      "frac": fracs[i]} for i in range(len(fracs))]
    if bars:
        show_chart(charts.histograms(bars, colors))
    else:
        st.caption("No gate_histogram artifact for these runs (ungated runs have none).")


def _ranked(url: str, sweep: str | None) -> list[str]:
    """The leaderboard's rows (val/ppl, best first); [] before anything finished."""
    if sweep is None or VAL_PPL not in data.summary_names(url, sweep):
        return []
    board = data.leaderboard(url, sweep, VAL_PPL, True, RESULT_STATES)
    return row_labels(board).to_list() if board.height else []


def render(url: str, sweep: str) -> None:  # app.py: these pages need a sweep
    st.header(f"Probes — {md(sweep)}")
    watch(url, sweep, "pr")
    runs = data.runs(url, sweep)
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    layer_names = [n for n in data.summary_names(url, sweep)
                   if charts.layer_index(n) is not None and n.rsplit("/", 1)[0] in PER_LAYER]
    summaries = data.summaries(url, sweep, tuple(layer_names))
    order = run_rows(runs)["row"].unique(maintain_order=True).to_list()
    picked = st.multiselect("Variants", order, key="pr_rows",
                            default=default_rows(order, _ranked(url, sweep)))
    st.caption("Seed mean per layer; bars: ± one standard deviation over seeds; one colour "
               "per variant, its learning rates told apart by dash.")
    cols = st.columns(len(PER_LAYER)) if len(picked) <= STACK_ABOVE else [st.container()] * 3
    for col, (metric, title) in zip(cols, PER_LAYER.items(), strict=True):
        frame = per_layer_frame(runs, summaries, metric).filter(pl.col("row").is_in(picked))
        with col:
            st.subheader(title)
            if frame.is_empty():
                st.caption(f"No `{metric}/layer_i` summaries for these variants.")
                continue
            wide = len(picked) > STACK_ABOVE  # one full-width chart per probe
            ncol = 6 if wide else 1  # a third of the page at 1280 px: one name a row
            n, lrs = frame["variant"].n_unique(), frame["lr"].n_unique()
            rows = charts.legend_rows(n, ncol) + (  # the LR legend has a row of its own
                charts.legend_rows(lrs, charts.DASH_LEGEND_COLUMNS) if lrs > 1 else 0)
            show_chart(charts.per_layer(frame, metric, colors, log_y=metric in LOG_SCALE,
                                        legend_columns=ncol),
                       extra=70 + charts.LEGEND_ROW_PX * rows)
    st.subheader("Gate score histograms")
    _histograms(url, runs, picked, colors)
