"""Scaling (issue 24): does a variant's gain survive scale? The paired change vs the baseline
with its 95 % CI at every evaluation step, against tokens and against training FLOPs (log x),
one colour per variant (dashboard/palette.py), one marker per model size; the trend sentences
and table beneath. Everything comes from db.scaling (results_db/analysis/scaling.py)."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from contract.analysis_defaults import METRIC
from contract.metrics import VAL
from dashboard import data, palette
from dashboard.charts import LEGEND, Layered
from dashboard.mdtext import md
from dashboard.views.common import show_chart, watch

TREND_COLUMNS = ("variant", "size", "x", "n_points", "n_seeds", "delta_pct_from",
                 "delta_pct_to", "ci_low_pct", "ci_high_pct", "slope", "slope_ci_low",
                 "slope_ci_high", "flops_overhead_pct", "verdict")
X_TITLES = {"tokens": "training tokens (log)", "flops": "training FLOPs (log)"}


def scaling(url: str, sweep: str, metric: str) -> Any:
    """db.scaling, cached per sweep state (a finished run shows up on the next page run)."""
    return _scaling(url, sweep, metric, data.sweep_state(url, sweep))


@st.cache_data(ttl=data.TTL_S, show_spinner=False)
def _scaling(url: str, sweep: str, metric: str, version: tuple[int, ...]) -> Any:
    return data.open_db(url).scaling(sweep, metric)


def delta_chart(points: pl.DataFrame, x: str, metric: str, colors: dict[str, str], *,
                iso: bool = False) -> Layered:
    """Δ % (or the iso-FLOP Δ %) with its 95 % CI bar at each point, log x; a line per
    (variant, size); a point without a CI (one seed) is hollow."""
    y, lo, hi = ("iso_delta_pct", "iso_ci_low_pct", "iso_ci_high_pct") if iso else \
        ("delta_pct", "ci_low_pct", "ci_high_pct")
    rows = points.filter(pl.col(y).is_not_null()).select(
        "variant", "size", "step", x, pl.col(y).alias("d"), pl.col(lo).alias("lo"),
        pl.col(hi).alias("hi"), "n").with_columns(
        series=pl.col("variant") + " · " + pl.col("size"), has_ci=pl.col("lo").is_not_null())
    pdf = rows.to_pandas()
    xenc = alt.X(f"{x}:Q", scale=alt.Scale(type="log"), title=X_TITLES[x])
    color = alt.Color("variant:N", scale=palette.scale(colors, rows["variant"].unique()
                                                      .to_list()), legend=LEGEND)
    shape = alt.Shape("size:N", legend=alt.Legend(orient="bottom", title="size"))
    title = f"Δ {metric} vs baseline (%)" + (", equal compute" if iso else "") + ", 95 % CI"
    bars = alt.Chart(pdf).mark_rule(strokeWidth=1.5, opacity=0.7).encode(
        x=xenc, y=alt.Y("lo:Q", title=title), y2="hi:Q", color=color)
    line = alt.Chart(pdf).mark_line(strokeWidth=1.2, opacity=0.6).encode(
        x=xenc, y="d:Q", color=color, detail="series:N")
    dots = alt.Chart(pdf).mark_point(size=70, strokeWidth=2, opacity=1).encode(
        x=xenc, y="d:Q", color=color, shape=shape,
        fill=alt.condition("datum.has_ci", color, alt.value("white")),
        tooltip=["variant", "size", "step", alt.Tooltip(f"{x}:Q", format=".3s"),
                 alt.Tooltip("d:Q", format="+.2f", title="Δ %"),
                 alt.Tooltip("lo:Q", format="+.2f"), alt.Tooltip("hi:Q", format="+.2f"), "n"])
    zero = alt.Chart(pl.DataFrame({"z": [0.0]}).to_pandas()).mark_rule(
        color="#333", strokeDash=[4, 3]).encode(y="z:Q")
    return alt.layer(bars, line, dots, zero).properties(height=320)


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
    if sc.points.is_empty():
        base = f"baseline `{md(sc.baseline)}`" if sc.baseline else "no baseline variant"
        st.info(f"No variant can be paired with the baseline at an evaluation step yet "
                f"({base}; the deltas need finished runs of both at the same seeds).")
        return
    st.markdown("\n".join(f"- {md(s)}" for s in sc.sentences))
    colors = palette.colors(data.variants(url, sweep), sc.baseline)
    left, right = st.columns(2)
    with left:
        st.markdown("**Δ vs tokens** (paired over seeds; hollow = one seed, no CI)")
        show_chart(delta_chart(sc.points, "tokens", metric, colors))
    with right:
        iso = st.toggle("At equal compute (the baseline read at the variant's FLOPs)",
                        key="sc_iso")
        st.markdown("**Δ vs training FLOPs** (6·N·D + attention, gates included)")
        show_chart(delta_chart(sc.points, "flops", metric, colors, iso=iso))
    st.dataframe(sc.trends.select(TREND_COLUMNS), hide_index=True, key="sc_trends")
