"""Explore: slice a sweep's runs the way W&B does, by any config key that varies.

Top to bottom: parallel coordinates over the chosen keys and the metric, one line per run,
with brushing (drag across an axis to keep the runs in that range; brushes on several axes
combine, the others' lines turn grey); the metric against a hyperparameter (one dot per kept
run); the kept runs grouped by a key (runs, n, mean, std, min, max: results_db/read/grouping.py);
and the config diff of any runs picked. The view (metric, axes, group, x, brushes, runs
compared) is kept in the URL (dashboard/urlstate.py), so a link reopens it.
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, cast

import altair as alt
import polars as pl
import streamlit as st

from contract.analysis_defaults import METRIC
from dashboard import data, explore, palette, urlstate
from dashboard.charts import LEGEND, Layered
from dashboard.compare import is_log
from dashboard.configdiff import runs_diff
from dashboard.mdtext import md
from dashboard.tables import fmt_num, metric_order
from dashboard.views.common import show_chart, watch
from results_db.read.grouping import group_stats

MAX_AXES = 6  # axes drawn by default (more are picked by hand)
MAX_RUNS = 2000  # runs drawn as lines (a bigger sweep: its first runs, the page says so)
NONE = "none"
BRUSH = "brush"  # the Vega-Lite selection's name
KEYS = ("ex_metric", "ex_axes", "ex_group", "ex_x", "ex_diff")


def render(url: str, sweep: str) -> None:  # app.py: these pages need a sweep
    st.header(f"Explore — {md(sweep)}")
    watch(url, sweep, "ex")
    runs = data.runs(url, sweep)
    if runs.is_empty():
        st.info("This sweep has no runs.")
        return
    names = metric_order(data.summary_names(url, sweep)) or [METRIC]
    urlstate.bind("ex_metric", METRIC if METRIC in names else names[0], options=names)
    metric = st.selectbox("Metric", names, key="ex_metric")
    table = explore.run_table(runs, data.config_frame(url, sweep),
                              data.summaries(url, sweep, (metric,)), metric)
    more = table.height > MAX_RUNS
    table = table.head(MAX_RUNS)
    keys = explore.config_keys(table, metric)
    if not keys:
        st.info("No config key varies across this sweep's runs: nothing to slice by.")
        return
    numeric = [k for k in keys if table[k].dtype.is_numeric() and k != "seed"]
    c1, c2, c3 = st.columns([3, 1.2, 1.2])
    urlstate.bind("ex_axes", [k for k in keys if k != "seed"][:MAX_AXES], options=keys)
    axes = c1.multiselect("Axes (config keys)", keys, key="ex_axes")
    urlstate.bind("ex_group", NONE, options=[NONE, *keys])
    group = c2.selectbox("Group by", [NONE, *keys], key="ex_group",
                         help="pool the kept runs by this key's value: the table below, and "
                         "the scatter's colours")
    urlstate.bind("ex_x", (numeric or keys)[0], options=keys)
    x = c3.selectbox("Scatter: x", keys, key="ex_x", help="the hyperparameter on the x axis")
    brushes = _brushes(table)
    kept = explore.brushed(table, brushes)
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    _parallel(table, [*axes, metric], kept, brushes, colors, more)
    shown = table.filter(pl.col("id").is_in(kept))
    _scatter(shown, x, metric, None if group == NONE else group, colors)
    if group != NONE:
        _groups(shown, group, metric)
    _diff(url, shown)
    urlstate.publish(KEYS, extra={"ex_brush": brushes or None})


# --- brushing --------------------------------------------------------------------------
def _chart_key() -> str:
    return f"ex_par_{st.session_state.get('ex_gen', 0)}"


def _brushes(table: pl.DataFrame) -> explore.Brushes:
    """The brushes in force: from the URL on the first run, then as each drag left them
    (``_on_drag``)."""
    urlstate.bind("ex_brush", {}, check=lambda v: explore.brush_fits(table, v))
    return dict(st.session_state["ex_brush"])


def _on_drag(table: pl.DataFrame, axes: list[str], key: str) -> None:
    """A drag on the chart drawn with ``key`` (its runs ``table``, its ``axes``): the brush of
    each axis it spans is added or replaced, so brushes on several axes combine and a second
    drag on a brushed axis replaces its range; the chart is then drawn fresh (a new key), so
    the browser never restores an old selection into a chart whose data changed under it.

    A callback, not a read in the page's body: Streamlit calls it once per changed selection,
    for the chart the drag landed on, before the rerun. Read in the body, a drag made while
    the last drag's rerun was still drawing landed on the chart being replaced, whose key the
    body no longer read, and was lost."""
    sel = _selection(st.session_state.get(key))
    xs, ys = sel.get("order"), sel.get("pos")
    if not (xs and ys):
        return
    brushes: explore.Brushes = dict(st.session_state.get("ex_brush") or {})
    first, last = math.ceil(min(xs) - 0.25), math.floor(max(xs) + 0.25)
    for i in range(max(first, 0), min(last, len(axes) - 1) + 1):
        if got := explore.brush_of(table, axes[i], min(ys), max(ys)):  # [] spans none
            brushes[axes[i]] = got
    st.session_state["ex_brush"] = brushes
    _new_chart()


def _selection(event: Any) -> dict[str, Any]:
    """The brush's ranges in a chart's selection state ({} when none)."""
    if event is None:
        return {}
    selection = event.get("selection", {}) if isinstance(event, dict) else \
        getattr(event, "selection", {})
    got = selection.get(BRUSH) if hasattr(selection, "get") else None
    return dict(got) if got else {}


def _new_chart() -> None:
    st.session_state["ex_gen"] = st.session_state.get("ex_gen", 0) + 1


def _clear() -> None:
    st.session_state["ex_brush"] = {}
    _new_chart()


def _parallel(table: pl.DataFrame, axes: list[str], kept: list[int],
              brushes: explore.Brushes, colors: dict[str, str], more: bool) -> None:
    st.subheader("Parallel coordinates")
    note = f" (the first {MAX_RUNS} runs)" if more else ""
    st.caption(f"One line per run{note}. Drag across an axis to keep the runs in that range "
               "(brushes on several axes combine); grey lines are the runs left out.")
    frame = explore.parallel_runs(table, axes, kept)
    rects = explore.brush_rects(table, axes, brushes)
    key = _chart_key()
    st.altair_chart(parallel_chart(frame, axes, rects, colors), width="stretch", height=380,
                    on_select=functools.partial(_on_drag, table, axes, key),
                    selection_mode=BRUSH, key=key)
    c1, c2 = st.columns([4, 1])
    if brushes:
        c1.markdown(f"**{len(kept)} of {table.height} runs kept**: "
                    f"{md(explore.brush_text(brushes, table))}")
        c2.button("Clear brushes", key="ex_clear", on_click=_clear)
    else:
        c1.markdown(f"**All {table.height} runs** (no brush)")


def parallel_chart(frame: pl.DataFrame, axes: list[str], rects: pl.DataFrame,
                   colors: dict[str, str]) -> Layered:
    """Runs as polylines over numbered axes (x = the axis's index, so an interval brush can
    span one axis), each axis labelled with its key; kept runs in their variant's colour,
    the others grey; the brushes in force as shaded boxes."""
    n = len(axes)
    names = json.dumps(explore.short_names(axes))  # the full key: the axis rule's tooltip
    # fixed domains, never "nice"d: the brush boxes' own fields share these scales, and a
    # domain widened by their data moved every axis after a drag (x [-1, 7] for 7 axes),
    # so the next drag, aimed where an axis had been, spanned none
    xscale = alt.Scale(domain=[-0.25, n - 0.4], nice=False, zero=False)
    yscale = alt.Scale(domain=[-explore.PAD, 1 + explore.PAD], nice=False, zero=False)
    xaxis = alt.Axis(values=list(range(n)), labelExpr=f"{names}[datum.value]", orient="top",
                     grid=False, labelAngle=0, labelLimit=160, labelOverlap=False,
                     domain=False, ticks=False)
    x = alt.X("order:Q", title=None, scale=xscale, axis=xaxis)
    y = alt.Y("pos:Q", axis=None, scale=yscale)
    shown = frame["variant"].unique().to_list()
    color = alt.condition("datum.kept", alt.Color("variant:N", scale=palette.scale(
        colors, shown), legend=LEGEND), alt.value("#d0d0d0"))
    brush = alt.selection_interval(name=BRUSH, encodings=["x", "y"], clear=False)
    lines = alt.Chart(frame.to_pandas()).mark_line(strokeWidth=1.6).encode(
        x=x, y=y, color=color, detail="id:N", order="order:Q",
        opacity=alt.condition("datum.kept", alt.value(0.9), alt.value(0.35)),
        tooltip=["run", "variant", "axis", "label"]).add_params(brush)
    rule_rows = pl.DataFrame({"order": list(range(n)), "axis": list(axes)})
    rules = alt.Chart(rule_rows.to_pandas()).mark_rule(color="#999").encode(
        x=x, tooltip=["axis"])
    written = frame.filter(pl.col("tick").is_not_null()).unique(["axis", "pos", "label"])
    ticks = alt.Chart(written.to_pandas()).mark_text(
        align="left", dx=4, fontSize=10, color="#333").encode(x=x, y=y, text="label:N")
    layers: list[Any] = [rules, lines, ticks]
    if rects.height:  # after the lines: the layer holding the brush stays second (Streamlit's
        # selection code threw "reading 'forEach'" and drew nothing when it moved)
        layers.append(alt.Chart(rects.to_pandas()).mark_rect(
            color="#4c78a8", opacity=0.15).encode(
            x=alt.X("x0:Q", title=None, scale=xscale, axis=xaxis), x2="x1:Q",
            y=alt.Y("y0:Q", axis=None, scale=yscale), y2="y1:Q"))
    return alt.layer(*layers).properties(height=300)


# --- metric vs hyperparameter, groups, config diff ---------------------------------------
def _scatter(shown: pl.DataFrame, x: str, metric: str, group: str | None,
             colors: dict[str, str]) -> None:
    st.subheader(f"{md(metric)} vs {md(x)}")  # names from the DB: shown as typed
    pts = shown.filter(pl.col(metric).is_not_null())
    if pts.is_empty():
        st.caption(f"No kept run has {md(metric)} yet.")
        return
    show_chart(scatter_chart(pts, x, metric, group, colors))


def scatter_chart(pts: pl.DataFrame, x: str, metric: str, group: str | None,
                  colors: dict[str, str]) -> Layered:
    """One dot per run: ``metric`` against config key ``x`` (a number on a linear or, for a
    learning rate, log axis; text as categories, dots spread sideways within each); coloured
    by variant, or by the group key's value when grouping."""
    # the metric and the key under fixed field names: Altair's shorthand read a ':' in a name
    # ('bench/acc:top:1') as a type and raised, and Vega reads '.' and '[' as nested access
    frame = pts.with_columns(
        xval=pl.col(x), yval=pl.col(metric), run=pl.col("name"),
        group=(pl.col(group).cast(pl.String).fill_null("–") if group else pl.col("variant")))
    numeric = frame[x].dtype.is_numeric()
    if numeric:
        log = is_log(x) and bool((frame[x].drop_nulls() > 0).all())
        xenc = alt.X("xval:Q", title=x, scale=alt.Scale(type="log") if log else
                     alt.Scale(zero=False))
    else:
        frame = frame.with_columns(xval=pl.col(x).cast(pl.String).fill_null("–"),
                                   jitter=(pl.col("id").hash(7) % 1000) / 1000 - 0.5)
        xenc = alt.X("xval:N", title=x, sort=sorted(set(frame["xval"].to_list())),
                     axis=alt.Axis(labelAngle=0, labelLimit=200))
    color = alt.Color("group:N", title=group, legend=LEGEND) if group else \
        alt.Color("group:N", scale=palette.scale(colors, frame["variant"].unique().to_list()),
                  legend=LEGEND)
    enc: dict[str, Any] = {"x": xenc, "y": alt.Y("yval:Q", title=metric,
                                                  scale=alt.Scale(zero=False)),
                           "color": color,
                           "tooltip": ["run", "variant", alt.Tooltip("xval", title=x),
                                       alt.Tooltip("yval:Q", title=metric, format=".4g")]}
    if not numeric:
        enc["xOffset"] = alt.XOffset("jitter:Q", scale=alt.Scale(domain=[-1.5, 1.5]))
    return cast(alt.LayerChart | alt.FacetChart, alt.Chart(frame.to_pandas()).mark_circle(
        size=70, opacity=0.85).encode(**enc).properties(height=320))


def group_frame(shown: pl.DataFrame, group: str, metric: str) -> pl.DataFrame:
    """results_db's group statistics of the kept runs, as the strings the page shows."""
    stats = group_stats(shown, group, metric)
    numeric = shown[group].dtype.is_numeric()
    return stats.select(
        pl.Series(group, [explore.fmt_key(v, group) if numeric else g for v, g in
                          zip(stats["key"].to_list(), stats["group"].to_list(), strict=True)],
                  dtype=pl.String),
        pl.col("runs").cast(pl.String), pl.col("n").cast(pl.String),
        *[pl.col(c).map_elements(fmt_num, return_dtype=pl.String).fill_null("–")
          .alias(f"{c} {metric}") for c in ("mean", "std", "min", "max")])


def _groups(shown: pl.DataFrame, group: str, metric: str) -> None:
    st.subheader(f"Grouped by {md(group)}")
    st.caption(f"The kept runs pooled by their {md(group)}: every other key, LR and seed mixed "
               "(a description, not a comparison: the Leaderboard compares with the "
               "baseline at the same LR, with CIs).")
    st.table(group_frame(shown, group, metric))  # a few rows: a plain table, all visible


def _diff(url: str, shown: pl.DataFrame) -> None:
    st.subheader("Config diff")
    labels = {r["id"]: f"{r['id']} · {r['name']}" for r in shown.iter_rows(named=True)}
    ids = list(labels)
    urlstate.bind("ex_diff", explore.default_pair(shown), options=ids)
    picked = st.multiselect("Runs to compare", ids, key="ex_diff",
                            format_func=lambda i: labels.get(i, str(i)))
    if len(picked) < 2:
        st.caption("Pick two or more runs: the config keys whose values differ among them.")
        return
    configs = {labels[i]: data.run_config(url, i) or {} for i in picked}
    rows = runs_diff(configs)
    if not rows:
        st.caption("These runs have the same config (up to their names).")
        return
    frame = pl.DataFrame([{"key": k, **dict(zip(configs, vals, strict=True))}
                          for k, vals in rows])
    st.caption(f"{len(rows)} config key(s) differ among these {len(picked)} runs.")
    st.table(frame)
