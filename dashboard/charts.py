"""Altair charts (altair ships with streamlit: no new dependency) and the loss-spike marker.

Charts take already-downsampled long frames; nothing here queries the DB.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from typing import Any, cast

import altair as alt
import numpy as np
import polars as pl

from dashboard import jsontext
from dashboard.curvedata import colour_order
from dashboard.palette import scale
from dashboard.tables import fmt_verdict
from results_db.analysis.columns import CONDITION
from results_db.analysis.labels import DIVERGED_SEEDS
from results_db.schema.vocab import verdict_kind

# What a layered chart is typed as once `.properties()`/`.interactive()` ran (altair's stubs)
Layered = alt.LayerChart | alt.FacetChart
SPIKE_WINDOW = 20  # same rule as the trainer's detector (trainer/stability.py)
SPIKE_MADS = 6.0
SPIKE_MIN_REL = 0.10
_LAYER = re.compile(r"/layer_([0-9]+)$")  # ASCII digits (contract/ids.py)


def spike_mask(values: np.ndarray, window: int = SPIKE_WINDOW) -> np.ndarray:
    """True where a point exceeds the median of the previous ``window`` points by more than
    max(6 * MAD, 10% of that median): the trainer's rule, applied to the plotted series.

    values: (T,) floats, NaN allowed (never a spike, and left out of the windows).
    """
    out = np.zeros(values.shape[0], dtype=bool)
    if values.shape[0] <= window:
        return out
    # (T - window, window): the `window` points before each candidate point
    windows = np.lib.stride_tricks.sliding_window_view(values[:-1], window)
    with warnings.catch_warnings():  # an all-NaN window (a diverged run): no spike, no noise
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(windows, axis=1)
        mad = np.nanmedian(np.abs(windows - med[:, None]), axis=1)
    cur = values[window:]
    thresh = np.maximum(SPIKE_MADS * mad, SPIKE_MIN_REL * np.abs(med))
    with np.errstate(invalid="ignore"):
        out[window:] = np.nan_to_num(cur - med, nan=-np.inf) > thresh
    return out


def mark_spikes(series: pl.DataFrame) -> pl.DataFrame:
    """(run, step, value) sorted by step per run -> the rows that are spikes."""
    parts = []
    for _, grp in series.sort("step").group_by("run", maintain_order=True):
        vals = grp["value"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        parts.append(grp.filter(pl.Series(spike_mask(vals))))
    return pl.concat(parts) if parts else series.head(0)


def layer_index(name: str) -> int | None:
    """'probe/max_activation/layer_3' -> 3; the aggregate name -> None."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


HISTOGRAM_CHARS = 10_000_000  # a histogram per layer of a few hundred bins: well under
HISTOGRAM_DEPTH = 4  # {"layers": [{"edges": [...]}]}


def parse_histogram(data: Any) -> list[tuple[str, list[float], list[float]]]:
    """A gate_histogram artifact -> [(label, edges, counts)].

    Accepts the trainer's {"edges": [...], "layers": {"layer_i": [counts]}} (shared edges),
    {"edges"|"bins": [...], "counts": [...]}, or per-layer nestings {"layers": [{...}]} /
    {"layer_i": {...}}, or one of these as the JSON text the DB holds (parsed within bounds);
    anything else yields [] (shown as "no histogram").
    """
    if isinstance(data, str):
        try:
            data = jsontext.loads(data, max_chars=HISTOGRAM_CHARS, max_depth=HISTOGRAM_DEPTH)
        except ValueError:
            return []
    if isinstance(data, Mapping):
        edges = data.get("edges", data.get("bins"))
        counts = data.get("counts")
        if isinstance(edges, list) and isinstance(counts, list) and len(edges) == len(counts) + 1:
            return [(str(data.get("layer", "all")), [float(e) for e in edges],
                     [float(c) for c in counts])]
        if isinstance(edges, list) and isinstance(data.get("layers"), Mapping):
            return [(str(k), [float(e) for e in edges], [float(c) for c in v])
                    for k, v in data["layers"].items()
                    if isinstance(v, list) and len(v) == len(edges) - 1]
        if isinstance(data.get("layers"), list):
            return [h for i, sub in enumerate(data["layers"])
                    for h in _relabel(parse_histogram(sub), f"layer_{i}")]
        return [h for k, sub in data.items() if isinstance(sub, Mapping)
                for h in _relabel(parse_histogram(sub), str(k))]
    return []


def combine_layers(hists: list[tuple[str, list[float], list[float]]], label: str
                   ) -> list[tuple[str, list[float], list[float]]]:
    """Sum the per-layer counts that share bin edges into one fraction-per-bin histogram
    (so runs with different numbers of scores compare); others are kept per layer."""
    if not hists or any(e != hists[0][1] for _, e, _ in hists):
        return [(f"{label} {lab}", e, c) for lab, e, c in hists]
    total = np.sum([c for _, _, c in hists], axis=0)
    frac = (total / total.sum()).tolist() if total.sum() > 0 else total.tolist()
    return [(label, hists[0][1], frac)]


def _relabel(hists: list[tuple[str, list[float], list[float]]], label: str) -> list:
    return [(label if lab == "all" else lab, e, c) for lab, e, c in hists]


# --- chart builders: every colour by variant through a palette scale (dashboard/palette.py) --
# full names; opaque symbols (a band layer would otherwise lend the legend its faint fill)
LEGEND = alt.Legend(orient="bottom", columns=4, labelLimit=0, title=None, symbolOpacity=1)


def _vscale(colors: dict[str, str], frame: pl.DataFrame) -> alt.Scale:
    """The palette's scale restricted to the variants in ``frame`` (sweep-wide colours)."""
    return scale(colors, frame["variant"].unique().to_list())


# verdict kind -> marker: the verdict is read off the marker and its label, never off a hue
# (hue is the variant's, the same on every page)
VERDICT_SHAPES: dict[str, str] = {
    "better": "triangle-down", "worse": "triangle-up", "within noise": "circle",
    "needs >= k seeds": "diamond", "inconclusive": "square", "n = 1": "cross",
    "no data": "stroke", "baseline": "circle"}


LABEL_ROOM = 0.015  # x span per label character kept free right of a verdict label's start


def label_room(rows: pl.DataFrame, seeds: pl.DataFrame | None = None) -> list[float]:
    """The dot plot's x domain: every CI, seed dot and 0, widened on the right so the longest
    verdict label ("needs >= 13 seeds for a ±1% effect", written after its CI) ends inside
    the chart (it ran past the plot's edge and was cut: ~6 px per character at 11 px, a
    35-character label ~210 px, about a third of a 600-px plot)."""
    xs = [0.0, *[v for c in ("ci_low_pct", "ci_high_pct", "delta_pct")
                 for v in rows[c].to_list() if v is not None and math.isfinite(v)]]
    if seeds is not None and seeds.height:
        xs += [v for v in seeds["delta_pct"].to_list() if v is not None and math.isfinite(v)]
    lo, hi = min(xs), max(xs)
    span = (hi - lo) or 1.0
    ends = [x + LABEL_ROOM * span * len(t) for x, t in
            zip(rows["label_x"].to_list(), rows["verdict"].to_list(), strict=True)
            if x is not None and math.isfinite(x)]
    return [lo - 0.02 * span, max([hi + 0.02 * span, *ends])]


def verdict_label(verdict: str | None, condition: str | None) -> str:
    """A row's verdict as its label beside the CI: what "needs >= k seeds" is for, as the
    table says it, and the baseline's condition at the row's LR where it has one
    (db.leaderboard's condition column, in untuned.py's words): a "better" against an
    untuned baseline read as a tuned one beside the row's CI."""
    return fmt_verdict(verdict) + (f", {condition}" if condition else "")


def delta_dots(board: pl.DataFrame, metric: str, colors: dict[str, str],
               seeds: pl.DataFrame | None = None, max_rows: int = 60,
               ci: str = "95 % CI") -> Layered:
    """Δ% vs baseline with its CI per leaderboard row (``row`` labels, in board order),
    in the variant's colour; the verdict as the marker's shape and a label beside the CI; a
    row without a CI (n = 1) is a hollow marker. ``seeds`` (row, delta_pct): each seed's own
    Δ%, drawn as small dots beside the mean. ``ci``: the interval's name on the axis (a
    corrected leaderboard's level, e.g. "Bonferroni 99.6 % CI")."""
    rows = board.filter(~pl.col("is_baseline") & pl.col("delta_pct").is_not_null()) \
        .head(max_rows)
    conditions = rows[CONDITION].to_list() if CONDITION in rows.columns else \
        [None] * rows.height
    rows = rows.select("row", "variant", "delta_pct", "ci_low_pct", "ci_high_pct", "verdict",
                       "n")
    kinds = [verdict_kind(v) or "no data" for v in rows["verdict"]]
    rows = rows.with_columns(has_ci=pl.col("ci_low_pct").is_not_null(),
                             kind=pl.Series(kinds, dtype=pl.String),
                             verdict=pl.Series([verdict_label(v, c) for v, c in zip(
                                 rows["verdict"], conditions, strict=True)], dtype=pl.String),
                             label_x=pl.coalesce("ci_high_pct", "delta_pct"))
    pdf = rows.to_pandas()
    order = rows["row"].to_list()
    y = alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=400))
    color = alt.Color("variant:N", scale=_vscale(colors, rows), legend=None)
    shown = [k for k in VERDICT_SHAPES if k in set(kinds)]
    # no legend: each marker carries its verdict as a text label beside its CI
    shape = alt.Shape("kind:N", title="verdict", legend=None, scale=alt.Scale(
        domain=shown, range=[VERDICT_SHAPES[k] for k in shown]))
    xq = alt.X("ci_low_pct:Q", title=f"Δ {metric} vs baseline (%), {ci}",
               scale=alt.Scale(domain=label_room(rows, seeds)))
    bars = alt.Chart(pdf).mark_rule(strokeWidth=2).encode(y=y, x=xq, x2="ci_high_pct:Q",
                                                         color=color)
    layers: list[Any] = [bars]
    if seeds is not None and seeds.height:
        pts = seeds.filter(pl.col("row").is_in(order) & pl.col("delta_pct").is_not_null())
        # just under the row's CI line: at the mean they would hide under its marker
        layers.append(alt.Chart(pts.to_pandas()).mark_circle(size=30, opacity=0.8).encode(
            y=y, x="delta_pct:Q", color=color, yOffset=alt.value(8),
            tooltip=["row", "seed", alt.Tooltip("delta_pct:Q", format="+.2f")]))
    layers.append(alt.Chart(pdf).mark_point(size=110, strokeWidth=2, opacity=1).encode(
        y=y, x="delta_pct:Q", color=color, shape=shape,
        fill=alt.condition("datum.has_ci", color, alt.value("white")),
        tooltip=["row", alt.Tooltip("delta_pct:Q", format="+.2f"),
                 alt.Tooltip("ci_low_pct:Q", format="+.2f"),
                 alt.Tooltip("ci_high_pct:Q", format="+.2f"), "verdict", "n"]))
    layers.append(alt.Chart(pdf).mark_text(align="left", dx=8, fontSize=11, color="#333").encode(
        y=y, x="label_x:Q", text="verdict:N"))
    zero = alt.Chart(pl.DataFrame({"x": [0.0]}).to_pandas()).mark_rule(
        color="#333", strokeDash=[4, 3]).encode(x="x:Q")
    layers.append(zero)
    return alt.layer(*layers).properties(height=max(80, 24 * len(order) + 30))


def curves(series: pl.DataFrame, y_title: str, colors: dict[str, str], *, x: str = "step",
           x_title: str = "step", log_y: bool = False, band: bool = False,
           spikes: pl.DataFrame | None = None, zero_rule: bool = False,
           raw: pl.DataFrame | None = None, color_by: str | None = None,
           symlog_y: bool = False) -> Layered:
    """series (variant, series, x, value[, lo, hi]): a line per series coloured by its
    variant; a series with one point is drawn as a point; ``band``: lo..hi shaded; ``raw``:
    the unsmoothed series (same columns), drawn faintly under the smoothed lines;
    ``color_by``: colour by the frames' ``colour`` column (a config key's value, e.g. the LR)
    instead of the variant, in the key's numeric order (the LR is then told by colour
    alone: a dash legend titled "lr" too was a second, duplicate legend); ``symlog_y``: a
    symmetric log y, for values on both sides of zero (the Δ curve)."""
    scale = alt.Scale(type="log") if log_y else \
        alt.Scale(type="symlog") if symlog_y else alt.Scale(zero=False)
    if color_by is not None:
        color = alt.Color("colour:N", title=color_by,
                          sort=colour_order(series["colour"].to_list()),
                          scale=alt.Scale(scheme="viridis"),
                          legend=alt.Legend(orient="bottom", title=color_by, labelLimit=0))
    else:
        color = alt.Color("variant:N", scale=_vscale(colors, series), legend=LEGEND)
    counts = series.group_by("series").len()
    single = series.join(counts.filter(pl.col("len") <= 1).drop("len"), on="series")
    enc = {"x": alt.X(f"{x}:Q", title=x_title), "color": color, "detail": "series:N",
           "tooltip": ["series", f"{x}:Q", alt.Tooltip("value:Q", format=".4g")]}
    layers: list[Any] = []
    if band and {"lo", "hi"} <= set(series.columns):
        layers.append(alt.Chart(series.to_pandas()).mark_area(opacity=0.18).encode(
            x=enc["x"], y=alt.Y("lo:Q", scale=scale, title=y_title), y2="hi:Q",
            color=color, detail="series:N"))
    line_enc = dict(enc)
    if "lr" in series.columns and series["lr"].n_unique() > 1 and color_by != "lr":
        # an LR ladder: dash by LR (unless the colour already says the LR)
        line_enc["strokeDash"] = alt.StrokeDash("lr:N", title="lr", sort=lr_order(series),
                                                legend=DASH_LEGEND)
    if raw is not None and raw.height:
        raw_enc = {k: v for k, v in line_enc.items() if k != "tooltip"}
        layers.append(alt.Chart(raw.to_pandas()).mark_line(strokeWidth=1, opacity=0.3).encode(
            y=alt.Y("value:Q", title=y_title, scale=scale), **raw_enc))
    layers.append(alt.Chart(series.to_pandas()).mark_line(strokeWidth=1.6).encode(
        y=alt.Y("value:Q", title=y_title, scale=scale), **line_enc))
    if single.height:
        layers.append(alt.Chart(single.to_pandas()).mark_point(size=80, filled=True).encode(
            y=alt.Y("value:Q", scale=scale), **enc))
    if spikes is not None and spikes.height:
        layers.append(alt.Chart(spikes.to_pandas()).mark_point(
            color="red", size=60, filled=True, shape="triangle-up").encode(
            x=f"{x}:Q", y=alt.Y("value:Q", scale=scale), tooltip=["series", f"{x}:Q", "value"]))
    if zero_rule:
        layers.append(alt.Chart(pl.DataFrame({"z": [0.0]}).to_pandas()).mark_rule(
            color="#333", strokeDash=[4, 3]).encode(y="z:Q"))
    return alt.layer(*layers).properties(height=300).interactive()


def lr_order(frame: pl.DataFrame, col: str = "lr") -> list[str]:
    """The LR labels of ``frame`` ('1e-3', '3e-3', '1e-2') in numeric order, for legends
    (Vega sorts nominal values as text: '1e-2' before '3e-3')."""
    def key(s: str) -> float:
        try:
            return float(s)
        except (TypeError, ValueError):
            return float("inf")
    return sorted((v for v in frame[col].unique().to_list() if v is not None), key=key)


def legend_rows(n: int, columns: int) -> int:
    """Rows a bottom legend of ``n`` entries in ``columns`` columns takes."""
    return max(1, -(-n // max(columns, 1)))


LEGEND_ROW_PX = 30  # one bottom-legend row as drawn (measured: ~30 px); show_chart adds these


# The LR legend of a line with points: a line sample, so its entries show their dash (the
# point overlay made Vega draw each entry as the same dot, and the LRs could not be told apart).
# Above the plot, two columns: bottom legends sit side by side, and the LR legend beside the
# variants' ran off a half-width chart at 1280 px; alone in its row it fits.
DASH_LEGEND_COLUMNS = 2
DASH_LEGEND = alt.Legend(orient="top", title="lr", symbolType="stroke", symbolSize=400,
                         symbolStrokeWidth=2, symbolStrokeColor="#333",
                         columns=DASH_LEGEND_COLUMNS)


def per_layer(frame: pl.DataFrame, title: str, colors: dict[str, str],
              log_y: bool = False, legend_columns: int = 2) -> Layered:
    """frame (variant, row, layer, mean, lo, hi, n): the seed mean per layer, one line per
    row coloured by its variant, error bars mean ± std over seeds. ``legend_columns``: 2 for
    the narrow side-by-side charts, more when the chart is full width (16 variants in 2
    columns ran past the chart's bottom and were cut off)."""
    scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    pdf = frame.to_pandas()
    color = alt.Color("variant:N", scale=_vscale(colors, frame), legend=alt.Legend(
        orient="bottom", columns=legend_columns, labelLimit=0, title=None))
    x = alt.X("layer:Q", title="layer", axis=alt.Axis(tickMinStep=1, format="d"),
              scale=alt.Scale(nice=False, padding=12))
    dash = {}  # an LR ladder: one colour per variant, its LRs told apart by dash
    if "lr" in frame.columns and frame["lr"].n_unique() > 1:
        dash = {"strokeDash": alt.StrokeDash("lr:N", title="lr", sort=lr_order(frame),
                                             legend=DASH_LEGEND)}
    line = alt.Chart(pdf).mark_line(point=True).encode(
        x=x, y=alt.Y("mean:Q", title=title, scale=scale), color=color, detail="row:N",
        tooltip=["row", "layer", alt.Tooltip("mean:Q", format=".4g"), "n"], **dash)
    err = alt.Chart(pdf).mark_errorbar(ticks=alt.TickConfig(size=8)).encode(
        x=x, y=alt.Y("lo:Q", scale=scale, title=title), y2="hi:Q", color=color,
        detail="row:N")
    return alt.layer(err, line).properties(height=260)


def histograms(rows: list[dict[str, Any]], colors: dict[str, str]) -> alt.FacetChart:
    """Gate-score histograms as small multiples, one panel per variant row, drawn as a filled
    step area (bars of 50-100 bins were hairlines at this width). rows: {variant, row, lo,
    hi, frac}; each bin's fraction is held from lo to hi. Each panel has its own axes: a
    sigmoid gate's scores lie in 0..1, a SiLU or additive one's up to ~20, and on one shared
    0-20 axis the sigmoid panels were a spike at 0."""
    frame = pl.DataFrame(rows)
    # a step needs its right edge too: the last bin's fraction again at its hi
    last = frame.group_by("row", maintain_order=True).last().with_columns(
        lo=pl.col("hi")).select(frame.columns)
    frame = pl.concat([frame, last]).sort("row", "lo")
    return cast(alt.FacetChart, alt.Chart(frame.to_pandas()).mark_area(
        interpolate="step-after", line=True, opacity=0.75).encode(
        x=alt.X("lo:Q", title="gate score"),
        y=alt.Y("frac:Q", title="fraction"),
        color=alt.Color("variant:N", legend=None, scale=_vscale(
            colors, pl.DataFrame({"variant": [r["variant"] for r in rows]}))),
        tooltip=["row", "lo", "hi", alt.Tooltip("frac:Q", format=".3f")]).properties(
        width=HIST_PANEL_PX, height=140).facet(facet=alt.Facet("row:N", title=None,
                                                               header=alt.Header(labelLimit=0)),
                                               columns=HIST_COLUMNS).resolve_scale(
                                                   x="independent", y="independent"))


# a facet grid has a fixed width: 4 panels of 220 px (1,212 px with their axes) ran past the
# page at 1280 px with the sidebar open; 3 of 200 px fit it (~800 px)
HIST_COLUMNS, HIST_PANEL_PX = 3, 200


VS_LR_LEGEND_COLUMNS = 1
LR_STATE_SHAPES = {"stable": "circle", "unstable": "circle", "below best LR": "triangle-left"}


def vs_lr(curve: pl.DataFrame, y: str, title: str, colors: dict[str, str], *, log_y: bool = False,
          ci: bool = False, msl: pl.DataFrame | None = None,
          diverged: bool = False) -> Layered:
    """One stability panel over the LR ladder (log x): ``y`` per (variant, lr) as line and
    points (hollow where the LR is unstable); ``ci``: ci_low..ci_high bars; ``msl`` (variant,
    max_stable_lr): a dashed vertical rule at each variant's max stable LR; ``diverged``: a
    cross where some seed diverged."""
    scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    pdf = curve.to_pandas()
    # narrow (a third of the page): one legend column (two cut names off at the chart's
    # right edge on the 10-variant gates-toy sweep); the state legend stayed beside it and
    # ran off the edge too, so the state is told by the marker (explained above the chart)
    color = alt.Color("variant:N", scale=_vscale(colors, curve), legend=alt.Legend(
        orient="bottom", columns=VS_LR_LEGEND_COLUMNS, labelLimit=0, title=None,
        symbolOpacity=1))
    x = alt.X("lr:Q", scale=alt.Scale(type="log"), title="learning rate (log)")
    layers: list[Any] = [alt.Chart(pdf).mark_line().encode(
        x=x, y=alt.Y(f"{y}:Q", title=title, scale=scale), color=color)]
    if ci:
        layers.append(alt.Chart(pdf).mark_errorbar(ticks=True).encode(
            x=x, y=alt.Y("ci_low:Q", scale=scale, title=title), y2="ci_high:Q", color=color))
    state = {}
    if "state" in curve.columns:  # stable / unstable / below best LR (views/stability.py)
        shown = [s for s in LR_STATE_SHAPES if s in set(curve["state"].to_list())]
        state = {"shape": alt.Shape("state:N", title=None, legend=None, scale=alt.Scale(
            domain=shown, range=[LR_STATE_SHAPES[s] for s in shown]))}
    layers.append(alt.Chart(pdf).mark_point(size=70).encode(
        x=x, y=alt.Y(f"{y}:Q", scale=scale), color=color, **state,
        fill=alt.condition("datum.stable", color, alt.value("white")),
        tooltip=["variant", alt.Tooltip("lr:Q", format=".2e"),
                 alt.Tooltip(f"{y}:Q", format=".4g"),
                 "state" if "state" in curve.columns else "stable", "n",
                 *([DIVERGED_SEEDS] if DIVERGED_SEEDS in curve.columns else [])]))
    if diverged and DIVERGED_SEEDS in curve.columns:  # a cross where a seed diverged
        div = curve.filter(pl.col(DIVERGED_SEEDS) > 0)
        if div.height:
            layers.append(alt.Chart(div.to_pandas()).mark_point(
                shape="cross", size=160, filled=True).encode(
                x=x, y=alt.Y(f"{y}:Q", scale=scale), color=color,
                tooltip=["variant", alt.Tooltip("lr:Q", format=".2e"), DIVERGED_SEEDS]))
    if msl is not None and msl.height:
        layers.append(alt.Chart(msl.to_pandas()).mark_rule(strokeDash=[6, 4]).encode(
            x=alt.X("max_stable_lr:Q", scale=alt.Scale(type="log")), color=color,
            tooltip=["variant", alt.Tooltip("max_stable_lr:Q", format=".2e")]))
    return alt.layer(*layers).properties(height=280)


def parallel(frame: pl.DataFrame, colors: dict[str, str]) -> Layered:
    """Parallel coordinates (dashboard/compare.parallel_frame): one polyline per row across
    the axes in ``order``, in its variant's colour; each axis's values written at their
    positions (dimension values, LRs, the metric's mean and Δ%)."""
    pdf = frame.to_pandas()
    axes = frame.sort("order")["axis"].unique(maintain_order=True).to_list()
    x = alt.X("axis:N", sort=axes, title=None, axis=alt.Axis(labelAngle=0, labelLimit=200,
                                                              orient="top"))
    y = alt.Y("pos:Q", axis=None, scale=alt.Scale(domain=[-0.05, 1.05]))
    color = alt.Color("variant:N", scale=_vscale(colors, frame), legend=LEGEND)
    lines = alt.Chart(pdf).mark_line(strokeWidth=1.8, opacity=0.8).encode(
        x=x, y=y, color=color, detail="row:N", order="order:Q",
        tooltip=["row", "axis", "label"])
    rules = alt.Chart(pdf).mark_rule(color="#bbb").encode(x=x)
    # the labels each axis writes (its levels, or a numeric axis's two ends): every row's
    # value at its height overlapped; a line's own values are in its tooltip
    written = frame.filter(pl.col("tick").is_not_null()) if "tick" in frame.columns else frame
    ticks = alt.Chart(written.unique(["axis", "pos", "label"]).to_pandas()).mark_text(
        align="left", dx=4, fontSize=10, color="#333").encode(x=x, y=y, text="label:N")
    return alt.layer(rules, lines, ticks).properties(height=260)
