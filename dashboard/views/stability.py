"""LR stability (the paper's Table 2 question, for sweeps with an LR axis): final loss vs LR (log
x) per variant with 95 % CIs, each variant's max stable LR marked with the rule and tolerance
stated, and loss spikes / divergence and max activation vs LR beside it. Everything comes from
db.stability (results_db/analysis/stability.py); a sweep with one LR has no such view."""

from __future__ import annotations

from typing import cast

import polars as pl
import streamlit as st

from contract.analysis_defaults import STABILITY_METRIC, STABILITY_TOL
from dashboard import charts, data, palette
from dashboard.mdtext import md
from dashboard.tables import fmt_delta_ci, fmt_lr, fmt_num, fmt_verdict
from dashboard.views.common import show_chart, table_height, watch
from results_db.analysis.labels import DIVERGED_SEEDS

TOLERANCES = tuple(sorted({0.02, STABILITY_TOL, 0.10, 0.20}))


def has_lr_axis(url: str, sweep: str) -> bool:
    """Whether some variant of the sweep ran at more than one learning rate."""
    runs = data.runs(url, sweep)
    if runs.is_empty():
        return False
    return bool(cast(int, runs.group_by("variant").agg(pl.col("lr").n_unique())["lr"].max()) > 1)


ONE_LR = "one LR: no ladder"


def summary_frame(summary: pl.DataFrame, metric: str = STABILITY_METRIC) -> pl.DataFrame:
    """db.stability(...).summary as display strings under readable headers; a variant that
    diverged at every LR has no best or max stable LR (null: map_elements skips it, so it is
    filled here, not shown as 'None'). A variant run at one LR has no ladder: its max stable
    LR and the seeds' agreement on it are said so, not "3e-2" and "0 of 0"."""
    name = "label" if "label" in summary.columns else "variant"  # readable ladder labels
    one = pl.col("n_lrs") <= 1
    # the seeds' own max stable LRs as a range ('2e-3 – 8e-3'; '–' where no seed has one)
    lo = pl.col("seed_msl_min").map_elements(fmt_lr, return_dtype=pl.String)
    hi = pl.col("seed_msl_max").map_elements(fmt_lr, return_dtype=pl.String)
    seeds = [pl.when(one).then(pl.lit(ONE_LR))
             .when(pl.col("n_seeds").fill_null(0) == 0).then(pl.lit("–"))
             .otherwise(pl.format("{} of {}", "seeds_agree", "n_seeds")).alias("seeds agree"),
             pl.when(one).then(pl.lit(ONE_LR))
             .when(lo == hi).then(lo).otherwise(pl.format("{} – {}", lo, hi))
             .alias("per-seed max stable LR")] \
        if {"seeds_agree", "n_seeds", "seed_msl_min", "seed_msl_max"} <= set(summary.columns) \
        else []
    msl = pl.col("max_stable_lr").map_elements(fmt_lr, return_dtype=pl.String)
    return summary.select(
        pl.col(name).alias("variant"),
        pl.col("best_lr").map_elements(fmt_lr, return_dtype=pl.String).alias("best LR"),
        pl.col("best_value").map_elements(fmt_num, return_dtype=pl.String)
        .alias(f"best {metric}"),
        pl.when(one).then(pl.lit(ONE_LR)).otherwise(msl).alias("max stable LR"), *seeds,
        pl.col("n_lrs").cast(pl.String).alias("LRs")) \
        .with_columns(pl.exclude("variant").fill_null("–"))


def delta_frame(curve: pl.DataFrame) -> pl.DataFrame:
    """Per (ladder, lr): the change vs the baseline at that LR with its 95 % CI and verdict
    (db.stability's curve, the leaderboard's numbers), as display strings."""
    if "delta_pct" not in curve.columns:
        return pl.DataFrame()
    rows = curve.filter(~pl.col("is_baseline").fill_null(False) & pl.col("verdict").is_not_null())
    name = "label" if "label" in rows.columns else "variant"
    return pl.DataFrame([{"variant": r[name], "lr": fmt_lr(r["lr"]),
                          "Δ% vs baseline [95% CI]": fmt_delta_ci(r["delta_pct"],
                                                                  r["ci_low_pct"],
                                                                  r["ci_high_pct"]),
                          # ci_method "none": no CI could be formed (one seed, no baseline)
                          "CI": r["ci_method"] if r["ci_method"] not in (None, "none")
                          else "–", "verdict": fmt_verdict(r["verdict"])}
                         for r in rows.sort(name, "lr").iter_rows(named=True)])


# Trained worse than the best LR, but from too small a step, not instability.
UNDER = "below best LR"


def lr_states(curve: pl.DataFrame, summary: pl.DataFrame) -> pl.DataFrame:
    """``curve`` + ``state`` per (variant ladder, lr): "stable"; "unstable" (a seed diverged,
    or degraded at or above the ladder's best LR: what the max-stable-LR rule reads); or
    "below best LR" (degraded below the best LR: under-trained, which the rule never counts
    as instability -- drawing it hollow read as "unstable")."""
    best = summary.select("lr_group_key", "best_lr")
    out = curve.join(best, on="lr_group_key", how="left")
    below = (pl.col(DIVERGED_SEEDS).fill_null(0) == 0) & pl.col("best_lr").is_not_null() \
        & (pl.col("lr") < pl.col("best_lr")) & ~pl.col("stable")
    return out.with_columns(state=pl.when(pl.col("stable")).then(pl.lit("stable"))
                            .when(below).then(pl.lit(UNDER))
                            .otherwise(pl.lit("unstable"))).drop("best_lr")


def render_view(url: str, sweep: str, key: str = "st") -> bool:
    """Draw the view; False (and nothing drawn) for a sweep without an LR axis."""
    c1, c2 = st.columns([1, 3])
    tol = c1.select_slider("Tolerance", TOLERANCES, value=STABILITY_TOL, key=f"{key}_tol",
                           format_func=lambda t: f"{t:.0%}")
    stab = data.stability(url, sweep, STABILITY_METRIC, tol)
    if stab is None:
        return False
    c2.info(f"**Max stable LR rule** (tolerance {tol:.0%}): {stab.rule}")
    if getattr(stab, "sentence", ""):  # the answer and its uncertainty, in words
        st.markdown(f"**{md(stab.sentence)}**")
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    curve = lr_states(stab.curve.with_columns(pl.col("stable").fill_null(False)), stab.summary)
    msl = stab.summary.select("variant", "max_stable_lr").drop_nulls()
    left, mid, right = st.columns(3)
    # room for the variant legend under each narrow chart
    extra = 70 + charts.LEGEND_ROW_PX * charts.legend_rows(curve["variant"].n_unique(),
                                                           charts.VS_LR_LEGEND_COLUMNS)
    with left:
        st.markdown("**Final val/loss vs LR** (95 % CI; ● stable, ○ unstable, ◁ below the "
                    "best LR (under-trained, not unstable); dashed = max stable LR)")
        show_chart(charts.vs_lr(curve, "mean", "final val/loss", colors, ci=True,
                                msl=msl), extra=extra)
    with mid:
        st.markdown("**Loss spikes and divergence vs LR** (✚ = a seed diverged there)")
        show_chart(charts.vs_lr(curve.with_columns(pl.col("loss_spikes").fill_null(0.0)),
                                "loss_spikes", "loss spikes (total over seeds)", colors,
                                diverged=True), extra=extra)
    with right:
        st.markdown("**Max activation vs LR** (log scale)")
        act = curve.filter(pl.col("max_activation").is_not_null()
                           & (pl.col("max_activation") > 0))
        if act.is_empty():
            st.caption("No probe/max_activation summaries.")
        else:
            show_chart(charts.vs_lr(act, "max_activation", "max |activation|", colors,
                                    log_y=True), extra=extra)
    st.dataframe(summary_frame(stab.summary), hide_index=True, key=f"{key}_summary",
                 height=table_height(stab.summary.height))
    deltas = delta_frame(stab.curve)
    if deltas.height:
        st.markdown("**Change vs the baseline at each LR** (paired by seed where seeds match; "
                    "95 % CI)")
        st.dataframe(deltas, hide_index=True, key=f"{key}_deltas",
                     height=table_height(deltas.height))
    return True


def render(url: str, sweep: str | None) -> None:
    st.header(f"LR stability — {md(sweep)}")
    watch(url, sweep, "st")
    if sweep is None or not render_view(url, sweep):
        st.info("This sweep has one learning rate per variant: no loss-vs-LR view. Add an LR "
                "axis (`axes: {train.lr: [...]}`) to measure stability.")
