"""Training curves: one colour per variant (the app's palette) or by any config key that varies
(LR, model size, a gate dimension), seeds as their mean with a named band
(std, standard error, 95 % CI) or one line per run, EMA smoothing, log y
(symmetric log on the Δ), x = step or tokens from a chosen step (step 0's untrained evaluation
is left out by default), a Δ-vs-baseline curve, loss spikes marked.

Points are downsampled in the DB (db.curves: the metric rollup for long runs), so 100 runs x
100k steps stay responsive. The page refreshes itself while a picked run is running.
"""

from __future__ import annotations

import polars as pl
import streamlit as st

from contract import metrics
from contract.states import RunStatus
from dashboard import charts, curvedata, data, palette, urlstate
from dashboard.mdtext import md
from dashboard.tables import fmt_lr, row_labels
from dashboard.views.common import follow_new, show_chart, watch

CURVES: dict[str, str] = {metrics.TRAIN_LOSS: "training loss", metrics.VAL_LOSS: "validation loss",
                          metrics.VAL_PPL: "validation perplexity",
                          metrics.TRAIN_LR: "learning rate", metrics.TRAIN_GRAD_NORM: "grad norm",
                          metrics.TRAIN_TOKENS_PER_S: "tokens/s",
                          metrics.MAX_ACTIVATION: "max |activation|",
                          metrics.FIRST_TOKEN_ATTENTION: "first-token attention"}
DEFAULT_CURVES = (metrics.TRAIN_LOSS, metrics.VAL_LOSS)
MAX_RUNS = 100
MAX_VARIANTS = 20
MAX_OPTIONS = 500
LIVE_REFRESH_S = 10
# The first step drawn by default: the trainer evaluates the untrained model at step 0 (a
# val/ppl of ~213 over a byte vocabulary beside trained values of ~8), which left the final
# values and the Δ curve in the chart's bottom few pixels. "From step" 0 draws it.
FROM_STEP = 1


def _run_labels(runs: pl.DataFrame) -> dict[int, str]:
    return {r["id"]: f"{r['id']} · {r['name']} · {r['status']}"
            for r in runs.sort("id").iter_rows(named=True)}


def default_runs(runs: pl.DataFrame) -> list[int]:
    """Every run that has started (all variants, all LRs), up to MAX_RUNS."""
    started = runs.filter(pl.col("status") != RunStatus.PENDING).sort("id")
    return started["id"].head(MAX_RUNS).to_list()


def _rows(runs: pl.DataFrame) -> pl.DataFrame:
    """runs (id, variant, lr, ...) + ``row``: the variant, '@ lr=..' where it has several."""
    return runs.with_columns(row_labels(runs))


def base_rows(runs: pl.DataFrame, base: str | None) -> dict[str, str]:
    """{row: the baseline's row at the same LR (else its first row)} for the Δ curve."""
    if base is None:
        return {}
    rows = _rows(runs)
    b = rows.filter(pl.col("variant") == base).sort("id")
    if b.is_empty():
        return {}
    by_lr = dict(zip(b["lr"].to_list(), b["row"].to_list(), strict=True))
    first = b["row"][0]
    return {r: by_lr.get(lr, first) for r, lr, v in
            zip(rows["row"].to_list(), rows["lr"].to_list(), rows["variant"].to_list(),
                strict=True) if v != base}


NO_GROUP = "variant row"
EACH_RUN = "each run"
SHADED = {"std": "± one standard deviation over each line's runs",
          "se": "± the standard error of each line's mean over its runs",
          "ci95": "the 95 % t interval of each line's mean over its runs"}
# the controls a link carries (dashboard/urlstate.py): ?cv_names=[...]&cv_log=true&...
URL_KEYS = ("cv_names", "cv_x", "cv_smooth", "cv_log", "cv_mode", "cv_delta", "cv_color",
            "cv_group", "cv_from")


def _controls(runs: pl.DataFrame) -> dict:
    keys = curvedata.colour_keys(runs)
    bind = urlstate.bind
    c1, c2, c3, c4, c5 = st.columns([3, 1, 1.4, 1, 1.6])
    bind("cv_names", list(DEFAULT_CURVES), options=list(CURVES))
    names = c1.multiselect("Metrics", list(CURVES), key="cv_names",
                           format_func=lambda n: f"{n} ({CURVES[n]})")
    bind("cv_x", "step", options=["step", "tokens"])
    x = c2.radio("x axis", ["step", "tokens"], horizontal=True, key="cv_x")
    bind("cv_smooth", 0.6, check=lambda v: 0.0 <= v <= 0.99)
    smooth = c3.slider("EMA smoothing (train/*)", 0.0, 0.99, step=0.01, key="cv_smooth",
                       help="applies to the dense training series only, drawn over the raw "
                       "curve; evaluation series (val/*, probes) and the Δ curve are never "
                       "smoothed")
    bind("cv_log", False)
    log_y = c4.toggle("log y", key="cv_log")
    modes = [*(f"mean {b}" if b.startswith("±") else f"mean, {b}" for b in curvedata.BANDS),
             EACH_RUN]
    bind("cv_mode", modes[0], options=modes)
    mode = c5.selectbox("Seeds", modes, key="cv_mode",
                        help="the seeds of a row as their mean with a band: ± one standard "
                        "deviation over runs (their spread), ± the standard error of the mean, "
                        "or the 95 % t interval of the mean; or one line per run")
    d1, d2, d3, d4 = st.columns([1, 1.3, 1.3, 1.2])
    bind("cv_delta", True)
    delta = d1.toggle("Δ vs baseline curve", key="cv_delta",
                      help="each variant's seed-mean curve minus the baseline's (same LR)")
    bind("cv_color", "variant", options=["variant", *keys])
    color_by = d2.selectbox("Colour by", ["variant", *keys],
                            key="cv_color", help="a config key that varies in this sweep "
                            "(learning rate, model size, a gate dimension); lines stay one "
                            "per variant row (or run)")
    bind("cv_group", NO_GROUP, options=[NO_GROUP, *keys])
    group = d3.selectbox("Group by", [NO_GROUP, *keys], key="cv_group",
                         help="one line per value of this key: the mean (± band) over every "
                         "picked run that has it, whatever its variant or LR (W&B's grouping)")
    bind("cv_from", FROM_STEP, check=lambda v: isinstance(v, int) and v >= 0)
    start = d4.number_input("From step", min_value=0, step=1, key="cv_from",
                            help="draw the points from this step on; step 0 is the untrained "
                            "model's evaluation (val/ppl ~ the vocabulary size), which "
                            "squashes the trained values into the chart's bottom pixels")
    grouped = None if group == NO_GROUP else group
    return {"names": names, "x": x, "smooth": smooth, "log_y": log_y, "mode": mode,
            "delta": delta and grouped is None,
            "color_by": grouped or (None if color_by == "variant" else color_by),
            "group_by": grouped, "from_step": int(start)}


def render(url: str, sweep: str) -> None:  # app.py: these pages need a sweep
    st.header(f"Curves — {md(sweep)}")
    watch(url, sweep, "cv")
    runs = data.runs(url, sweep)
    labels = _run_labels(runs)
    if not labels:
        st.info("This sweep has no runs.")
        return
    opts = _controls(runs)
    variants = data.variants(url, sweep)
    # picks survive page runs; a variant or run that appears later joins them (the page's
    # watcher reruns it when a run starts)
    chosen = st.multiselect("Variants", variants, key="cv_variants", default=follow_new(
        "cv_variants", variants, variants[:MAX_VARIANTS]))
    # the runs of the chosen variants (a 10k-option widget costs ~1 s per page run)
    mine = runs.filter(pl.col("variant").is_in(chosen)).sort("id").head(MAX_OPTIONS)
    options = mine["id"].to_list()
    picked = st.multiselect("Runs", options, format_func=labels.__getitem__,
                            max_selections=MAX_RUNS, key="cv_runs",
                            default=follow_new("cv_runs", options, default_runs(mine), MAX_RUNS))
    points = st.select_slider("Points per curve", [250, 500, 1000, 2000, 5000], value=1000,
                              key="cv_points")
    if not picked or not opts["names"]:
        st.info("Pick at least one run and one metric.")
        return
    live = runs.filter(pl.col("id").is_in(picked) & (pl.col("status") == RunStatus.RUNNING)).height
    if opts["group_by"]:
        st.caption(f"Grouped by {opts['group_by']}: one line per value, over every picked run "
                   "that has it (variants and LRs pooled); no Δ-vs-baseline curve.")
    draw = st.fragment(run_every=LIVE_REFRESH_S if live else None)(_draw)
    draw(url, sweep, tuple(sorted(picked)), opts, points)
    if live:
        st.caption(f"{live} picked run(s) running: refreshed every {LIVE_REFRESH_S} s.")
    urlstate.publish(URL_KEYS)


def _points(url: str, sweep: str, runs: pl.DataFrame, picked: tuple[int, ...], name: str,
            x: str, raw: pl.DataFrame) -> pl.DataFrame:
    """(run_id, variant, row, x, value) of one metric; x in steps or tokens."""
    frame = raw.filter(pl.col("name") == name).join(
        _rows(runs).select(pl.col("id").alias("run_id"), "variant", "row",
                           pl.col("lr").map_elements(fmt_lr, return_dtype=pl.String)),
        on="run_id")
    if x == "tokens":
        tps = data.tokens_per_step(url, sweep)
        frame = frame.filter(pl.col("run_id").is_in(list(tps))).with_columns(
            x=pl.col("step") * pl.col("run_id").replace_strict(tps, return_dtype=pl.Int64))
    else:
        frame = frame.with_columns(x=pl.col("step"))
    return frame.select("run_id", "variant", "row", "lr", pl.col("x").cast(pl.Float64), "value")


def _draw(url: str, sweep: str, picked: tuple[int, ...], opts: dict, max_points: int) -> None:
    runs = data.runs(url, sweep)
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    raw = data.metrics(url, picked, tuple(opts["names"]), max_points) \
        .filter(pl.col("step") >= opts["from_step"])
    names = dict(zip(runs["id"].to_list(), runs["name"].to_list(), strict=True))
    xt = "tokens" if opts["x"] == "tokens" else "step"
    for name in opts["names"]:
        pts = _points(url, sweep, runs, picked, name, opts["x"], raw)
        if opts["group_by"]:  # a line per value of the key: it is the row (and the colour)
            pts = curvedata.grouped(pts, curvedata.group_of(runs, opts["group_by"]))
        if pts.is_empty():
            st.caption(f"{name}: no points yet for these runs"
                       + (" (tokens need the runs' RunSpec)" if opts["x"] == "tokens" else "."))
            continue
        spikes = None
        if name == metrics.TRAIN_LOSS:
            raw_runs = curvedata.per_run(pts, names).drop("lr").rename(
                {"series": "run", "x": "step"})
            spikes = charts.mark_spikes(raw_runs).rename({"run": "series", "step": "x"})
        title = CURVES[name] + (f" — {len(spikes)} spike(s) marked" if spikes is not None
                                and len(spikes) else "")
        st.subheader(title)
        band = opts["mode"] != EACH_RUN
        label = next((k for k in curvedata.BANDS if opts["mode"].endswith(k)), "± std")
        which = curvedata.BANDS[label]
        grouped = curvedata.seed_mean(pts, band=which)  # raw: drawn faintly, the Δ's input
        under = grouped if band else curvedata.per_run(pts, names)
        smoothed = opts["smooth"] > 0 and curvedata.smoothable(name)
        if smoothed:
            sm = curvedata.ema(pts, opts["smooth"])
            shown = curvedata.seed_mean(sm, band=which) if band else \
                curvedata.per_run(sm, names)
        else:
            shown = under
        key = opts["color_by"]
        if key is not None:  # colour by a config key: each row's (or run's) value of it
            of = curvedata.colour_of(runs, key, by_run=not band)
            if opts["group_by"] and band:  # the rows are the key's values themselves
                of = {v: v for v in shown["series"].unique().to_list()}
            shown, under = curvedata.with_colour(shown, of), curvedata.with_colour(under, of)
        show_chart(charts.curves(shown, name, colors, x="x", x_title=xt,
                                 log_y=opts["log_y"], band=band, spikes=spikes,
                                 raw=under if smoothed else None, color_by=key))
        shade = f"Shaded: {SHADED[which]}. " if band else ""
        st.caption(shade + (f"EMA {opts['smooth']:.2f} over the raw curve (faint)." if smoothed else
                   "Raw values (evaluation series are never smoothed)."
                   if not curvedata.smoothable(name) else "Raw values."))
        if opts["delta"]:
            _delta(runs, url, sweep, grouped, name, colors, xt, key, opts["log_y"])


def _delta(runs: pl.DataFrame, url: str, sweep: str, grouped: pl.DataFrame, name: str,
           colors: dict[str, str], xt: str, color_by: str | None = None,
           log_y: bool = False) -> None:
    diff = curvedata.delta_vs_baseline(grouped, base_rows(runs, data.baseline(url, sweep)))
    if diff.is_empty():
        return
    if color_by is not None:
        diff = curvedata.with_colour(diff, curvedata.colour_of(runs, color_by, by_run=False))
    st.caption(f"Δ {name} vs baseline (seed means of the raw values at the same LR; below 0 = "
               "lower than baseline)")
    # log y: a symmetric log for the Δ (it crosses zero), so a large early gap and the
    # small final one are both readable
    show_chart(charts.curves(diff, f"Δ {name}", colors, x="x", x_title=xt,
                             zero_rule=True, color_by=color_by, symlog_y=log_y))
