"""Scaling: does a variant's gain survive scale? The paired change vs the baseline
with its 95 % CI at every evaluation step, against tokens and against training FLOPs (log x),
one colour per variant (dashboard/palette.py), one dash per LR, one marker per model size;
the trends table beneath and its sentences collapsed (60 of them stood before the first chart
on the 57-run gates-toy sweep). Everything comes from db.scaling
(results_db/analysis/scaling.py)."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from contract.analysis_defaults import METRIC
from contract.metrics import VAL
from dashboard import data, palette
from dashboard.charts import (
    DASH_LEGEND,
    DASH_LEGEND_COLUMNS,
    LEGEND_ROW_PX,
    Layered,
    legend_rows,
    lr_order,
)
from dashboard.mdtext import md
from dashboard.scalingtable import trend_table
from dashboard.tables import fmt_lr
from dashboard.views.common import show_chart, table_height, watch

X_TITLES = {"tokens": "training tokens (log)", "flops": "training FLOPs (log)"}
# Axis labels: SI for tokens (307k, 614k), scientific for FLOPs (3e+11): Vega's default wrote
# 100,000,000,000
X_FORMATS = {"tokens": "~s", "flops": ".1~e"}
LEGEND_COLUMNS = 2  # half-width charts: four columns ran past the edge and were cut off


def scaling(url: str, sweep: str, metric: str) -> Any:
    """db.scaling, cached per sweep state (a finished run shows up on the next page run)."""
    return _scaling(url, sweep, metric, data.sweep_state(url, sweep))


@st.cache_data(ttl=data.TTL_S, show_spinner=False)
def _scaling(url: str, sweep: str, metric: str, version: tuple[int, ...]) -> Any:
    return data.open_db(url).scaling(sweep, metric)


def chart_rows(points: pl.DataFrame, iso: bool = False) -> pl.DataFrame:
    """db.scaling's points as the charts draw them: (variant, size, lr as text, series, step,
    tokens, flops, d, lo, hi, n, has_ci). ``series`` is one line: the variant at one size and
    one LR (a variant's LRs were one zigzag line in one colour, and could not be told apart)."""
    y, lo, hi = ("iso_delta_pct", "iso_ci_low_pct", "iso_ci_high_pct") if iso else \
        ("delta_pct", "ci_low_pct", "ci_high_pct")
    rows = points.filter(pl.col(y).is_not_null())
    lr = pl.col("lr").map_elements(fmt_lr, return_dtype=pl.String) if rows.height else \
        pl.lit("–")
    return rows.select(
        "variant", "size", lr.alias("lr"), "step", "tokens", "flops", pl.col(y).alias("d"),
        pl.col(lo).alias("lo"), pl.col(hi).alias("hi"), "n").with_columns(
        series=pl.concat_str("variant", pl.lit(" · "), "size", pl.lit(" · lr "), "lr"),
        has_ci=pl.col("lo").is_not_null())


def delta_chart(points: pl.DataFrame, x: str, metric: str, colors: dict[str, str], *,
                iso: bool = False) -> Layered:
    """Δ % (or the iso-FLOP Δ %) with its 95 % CI bar at each point, log x; a line per
    (variant, size, LR) in the variant's colour, the LR by dash and the size by marker where
    the sweep has several; a point without a CI (one seed) is hollow."""
    rows = chart_rows(points, iso)
    pdf = rows.to_pandas()
    xenc = alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=X_TITLES[x],
                 axis=alt.Axis(format=X_FORMATS[x]))
    color = alt.Color("variant:N", scale=palette.scale(colors, rows["variant"].unique()
                                                      .to_list()),
                      legend=alt.Legend(orient="bottom", columns=LEGEND_COLUMNS, labelLimit=0,
                                        title=None, symbolOpacity=1))
    sizes = rows["size"].n_unique() > 1
    shape = alt.Shape("size:N", legend=alt.Legend(orient="bottom", title="size")) if sizes \
        else alt.Undefined
    dash = alt.StrokeDash("lr:N", sort=lr_order(rows), legend=DASH_LEGEND) \
        if rows["lr"].n_unique() > 1 else alt.Undefined
    title = f"Δ {metric} vs baseline (%)" + (", equal compute" if iso else "") + ", 95 % CI"
    bars = alt.Chart(pdf).mark_rule(strokeWidth=1.5, opacity=0.7).encode(
        x=xenc, y=alt.Y("lo:Q", title=title), y2="hi:Q", color=color, detail="series:N")
    line = alt.Chart(pdf).mark_line(strokeWidth=1.5, opacity=0.8).encode(
        x=xenc, y="d:Q", color=color, detail="series:N", strokeDash=dash)
    dots = alt.Chart(pdf).mark_point(size=70, strokeWidth=2, opacity=1).encode(
        x=xenc, y="d:Q", color=color, shape=shape,
        fill=alt.condition("datum.has_ci", color, alt.value("white")),
        tooltip=["variant", "lr", "size", "step", alt.Tooltip(f"{x}:Q", format=".3s"),
                 alt.Tooltip("d:Q", format="+.2f", title="Δ %"),
                 alt.Tooltip("lo:Q", format="+.2f"), alt.Tooltip("hi:Q", format="+.2f"), "n"])
    zero = alt.Chart(pl.DataFrame({"z": [0.0]}).to_pandas()).mark_rule(
        color="#333", strokeDash=[4, 3]).encode(y="z:Q")
    return alt.layer(bars, line, dots, zero).properties(height=320)


def legend_px(points: pl.DataFrame) -> int:
    """Room under a chart for its bottom legends (variants in LEGEND_COLUMNS, the LRs, the
    sizes), so none is cut off (show_chart's ``extra``)."""
    rows = chart_rows(points)
    lrs = rows["lr"].n_unique()
    n = legend_rows(rows["variant"].n_unique(), LEGEND_COLUMNS) \
        + (legend_rows(lrs, DASH_LEGEND_COLUMNS) if lrs > 1 else 0) \
        + (rows["size"].n_unique() > 1)  # the LRs above the plot, the rest below
    return 70 + LEGEND_ROW_PX * n


def _metric(url: str, sweep: str) -> str:
    names = [n for n in data.summary_names(url, sweep) if n.startswith(VAL)] or [METRIC]
    default = names.index(METRIC) if METRIC in names else 0
    return str(st.selectbox("Metric", names, index=default, key="sc_metric"))


def render(url: str, sweep: str | None) -> None:
    st.header(f"Scaling — {md(sweep)}")
    watch(url, sweep, "sc")
    if sweep is None:
        return
    metric = _metric(url, sweep)
    sc = scaling(url, sweep, metric)
    if sc.points.is_empty():  # why, in the analysis' words (as the CLI says it)
        first, *rest = sc.said(sweep)
        st.info(md(first))
        for line in rest:
            st.markdown(md(line))
        return
    colors = palette.colors(data.variants(url, sweep), sc.baseline)
    extra = legend_px(sc.points)
    left, right = st.columns(2)  # the charts first: the answer at a glance
    with left:
        st.markdown("**Δ vs tokens** (paired over seeds; hollow = one seed, no CI)")
        show_chart(delta_chart(sc.points, "tokens", metric, colors), extra=extra)
    with right:
        iso = st.toggle("At equal compute (the baseline read at the variant's FLOPs)",
                        key="sc_iso")
        st.markdown("**Δ vs training FLOPs** (6·N·D + attention, gates included)")
        show_chart(delta_chart(sc.points, "flops", metric, colors, iso=iso), extra=extra)
    table = trend_table(sc.trends)
    st.markdown("**Trends**: the change vs the baseline at the end of training and its slope "
                "per decade of tokens, and the change at equal compute (read mid-training, at "
                "the step named), per variant and LR")
    st.dataframe(table, hide_index=True, key="sc_trends", height=table_height(table.height),
                 width="stretch",
                 column_config={"verdict": st.column_config.TextColumn("verdict", width=200),
                                "read at": st.column_config.TextColumn("read at", width=170)})
    with st.expander(f"The same in {len(sc.sentences)} sentences"):
        st.markdown("\n".join(f"- {md(s)}" for s in sc.sentences))
