"""Shaping training curves for display: EMA smoothing, seeds as their mean with a named band (std,
standard error, 95 % CI) on a common grid,
and the Δ-vs-baseline curve. Pure polars over downsampled points (db.curves); presentation
only -- the conclusions (Δ with CIs, verdicts) come from results_db.

Frames: ``points`` (run_id, variant, row, x, value) where ``row`` is the group a run belongs to
(its variant, plus its LR where the variant has several) and ``x`` the step or tokens.
"""

from __future__ import annotations

from typing import cast

import polars as pl

from contract.metrics import TRAIN
from dashboard.tables import fmt_lr, row_labels
from results_db.analysis.tdist import t_quantile  # the t rule of every CI shown
from results_db.schema.vocab import DIMENSIONS

GRID = 200  # common x bins for the seed mean: downsampled runs keep different steps
# Smoothing is for dense, noisy series logged every few steps (training); an evaluation series
# (val/*, probes) has a handful of points, and an EMA over 3-5 of them moves the last one far
# from its value (a final val/loss of 1.465 read ~2.2): those are drawn as measured.
SMOOTHABLE_PREFIXES: tuple[str, ...] = (TRAIN,)


def smoothable(name: str) -> bool:
    """Whether the EMA may apply to the series ``name`` (training series only)."""
    return name.startswith(SMOOTHABLE_PREFIXES)


def ema(points: pl.DataFrame, smoothing: float) -> pl.DataFrame:
    """TensorBoard-style EMA per run over x (weight ``smoothing`` on the past; 0 = off).
    NaN (null) points stay null and do not reset the average. Callers apply it to training
    series only (``smoothable``) and draw the raw series with it."""
    if smoothing <= 0 or points.is_empty():
        return points
    alpha = 1.0 - min(max(smoothing, 0.0), 0.999)
    return points.sort("run_id", "x").with_columns(
        pl.col("value").ewm_mean(alpha=alpha, adjust=True, ignore_nulls=True)
        .over("run_id").alias("_ema")).with_columns(
        value=pl.when(pl.col("value").is_null()).then(None).otherwise(pl.col("_ema"))
    ).drop("_ema")


def per_run(points: pl.DataFrame, names: dict[int, str]) -> pl.DataFrame:
    """(variant, series[, lr], x, value): one line per run, labelled by its name."""
    lr = ["lr"] if "lr" in points.columns else []
    return points.with_columns(series=pl.col("run_id").replace_strict(
        names, return_dtype=pl.String)).select("variant", "series", *lr, "x", "value")


# the seed band a reader can pick: its name on the page -> what it spans around the mean
BANDS: dict[str, str] = {"± std": "std", "± standard error": "se", "95 % CI": "ci95"}


def _half_width(band: str) -> pl.Expr:
    """The band's half width from a bin's std and n over runs (one run: none)."""
    std, n = pl.col("std").fill_null(0.0), pl.col("n")
    if band == "std":
        return std
    se = std / n.cast(pl.Float64).sqrt()
    if band == "se":
        return se
    t = n.map_elements(lambda k: t_quantile(0.975, k - 1) if k > 1 else 0.0,
                       return_dtype=pl.Float64)
    return (se * t).fill_nan(0.0)


def seed_mean(points: pl.DataFrame, grid: int = GRID, band: str = "std") -> pl.DataFrame:
    """(variant, series=row, x, value=mean, lo, hi, n): per row and x bin, the mean over the
    row's runs of each run's bin mean; lo..hi = mean ± ``band`` over runs (BANDS' values:
    std, standard error, or the 95 % t interval of the mean; one run: no band)."""
    if points.is_empty():
        return points.select("variant", pl.col("row").alias("series"), "x", "value")
    x0, x1 = cast(float, points["x"].min()), cast(float, points["x"].max())  # x is numeric
    width = max((x1 - x0) / grid, 1e-12)
    binned = points.drop_nulls("value").with_columns(
        _b=((pl.col("x") - x0) / width).floor().clip(0, grid - 1).cast(pl.Int64))
    keys = ["row", "variant", *(["lr"] if "lr" in points.columns else [])]
    per = binned.group_by(*keys, "run_id", "_b").agg(
        pl.col("value").mean(), pl.col("x").mean())
    out = per.group_by(*keys, "_b").agg(
        pl.col("x").mean(), pl.col("value").mean().alias("mean"),
        pl.col("value").std().alias("std"), pl.len().alias("n"))
    half = _half_width(band)
    return out.sort("row", "_b").select(
        "variant", pl.col("row").alias("series"), *keys[2:], "x", "_b",
        pl.col("mean").alias("value"),
        (pl.col("mean") - half).alias("lo"), (pl.col("mean") + half).alias("hi"), "n")


def delta_vs_baseline(grouped: pl.DataFrame, base_of: dict[str, str]) -> pl.DataFrame:
    """The seed-mean curve of each row minus its baseline row's at the same x bin; ``grouped``
    is the seed mean of the *raw* points (a smoothed Δ lags and can flip sign).
    ``base_of``: {row: baseline row} (the baseline at the same LR, or the sweep's baseline);
    rows without one, and the baseline rows themselves, are left out."""
    if grouped.is_empty() or not base_of:
        return grouped.head(0)
    base = grouped.select(pl.col("series").alias("_base"), "_b", pl.col("value").alias("_bv"))
    keyed = grouped.filter(pl.col("series").is_in(list(base_of))).with_columns(
        _base=pl.col("series").replace_strict(base_of, return_dtype=pl.String))
    out = keyed.join(base, on=["_base", "_b"], how="inner")
    lr = ["lr"] if "lr" in out.columns else []
    return out.select("variant", "series", *lr, "x",
                      (pl.col("value") - pl.col("_bv")).alias("value"))


# Config keys Curves can colour by (run columns, dashboard/data.RUN_COLUMNS): shown where they
# take more than one value in the sweep.
COLOUR_KEYS: tuple[str, ...] = ("lr", "params_total",
                               *(d for d in DIMENSIONS if d != "lr"))


def colour_keys(runs: pl.DataFrame) -> list[str]:
    """The COLOUR_KEYS with more than one value (null counts as one) among ``runs``."""
    return [k for k in COLOUR_KEYS if k in runs.columns
            and runs[k].cast(pl.String).fill_null("–").n_unique() > 1]


def _label(key: str, v: object) -> str:
    if v is None:
        return "–"
    if key == "lr":
        return fmt_lr(float(cast(float, v)))
    return str(v)


def colour_of(runs: pl.DataFrame, key: str, *, by_run: bool) -> dict[str, str]:
    """{series: the value of ``key`` as text}: series are row labels (variant, '@ lr=..' where
    it has several: one config per row up to the seed) or, ``by_run``, run names."""
    rows = runs.with_columns(row_labels(runs))
    col = "name" if by_run else "row"
    first = rows.sort("id").group_by(col, maintain_order=True).first()
    return {s: _label(key, v) for s, v in zip(first[col].to_list(), first[key].to_list(),
                                              strict=True)}


def with_colour(frame: pl.DataFrame, colour: dict[str, str]) -> pl.DataFrame:
    """``frame`` + ``colour``: its series' value of the colour key ('–' when unknown)."""
    return frame.with_columns(colour=pl.col("series").replace_strict(
        colour, default="–", return_dtype=pl.String))


def colour_order(labels: list[str]) -> list[str]:
    """Colour-key values in numeric order where they are numbers ('3e-3' < '1e-2'), else as
    text; '–' last."""
    def key(s: str) -> tuple[int, float, str]:
        try:
            return (0, float(s), s)
        except ValueError:
            return (1 if s != "–" else 2, 0.0, s)
    return sorted(set(labels), key=key)


def group_of(runs: pl.DataFrame, key: str) -> dict[int, str]:
    """{run id: its value of config key ``key`` as text}: the line a run joins when Curves
    groups by the key."""
    return {i: _label(key, v) for i, v in zip(runs["id"].to_list(), runs[key].to_list(),
                                               strict=True)}


def grouped(points: pl.DataFrame, group: dict[int, str]) -> pl.DataFrame:
    """``points`` with each run's row (and variant) set to its group's label, and no LR of
    its own, so the seed mean pools every run of a group: variants and LRs alike."""
    label = pl.col("run_id").replace_strict(group, default="–", return_dtype=pl.String)
    return points.with_columns(row=label, variant=label, lr=pl.lit("–"))
