"""Learning-rate stability as the paper measures it (Table 2) and as the runs show it.

A *ladder* is the runs of one config at several learning rates (``lr_group_key``: the config
minus seed, ``train.lr`` and ``train.min_lr``), labelled by its variant. Per (ladder, lr):

- ``n`` finished runs; ``mean``/``std``/CI of the final ``metric`` (default val/loss) over the
  seeds that neither diverged nor ended non-finite;
- ``diverged``: how many seeds diverged (run status ``diverged``, a ``stability/diverged``
  summary > 0, or a NaN/inf final value); ``loss_spikes``: ``stability/loss_spikes`` summed
  over seeds; ``max_activation``: the largest ``probe/max_activation`` over seeds;
- ``rel_to_best`` = mean / best - 1, where ``best`` is the ladder's lowest mean over the LRs
  where no seed diverged;
- ``degraded``: did not diverge but ``mean > best * (1 + tol)`` -- the run that trained badly
  without a spike (tol default 0.05 = 5 %, configurable);
- ``stable`` = no seed diverged and not degraded.

**max_stable_lr** = the largest LR reached from the ladder's best LR upwards through stable
LRs only (every tested LR from the best up to it is stable): a stable LR above an unstable
one is luck, not stability. Ties in max_stable_lr are told apart by ``rel_at_top_lr`` (the
degradation at the largest LR tried; a diverged top LR counts as infinitely degraded): the
summary lists the most stable ladder first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from results_db.analysis.stats import t_column
from results_db.vocab import RESULT_STATES, higher_is_better

if TYPE_CHECKING:
    import polars as pl

DIVERGED_FLAG = "stability/diverged"
SPIKES = "stability/loss_spikes"
MAX_ACT = "probe/max_activation"
EXTRA_METRICS = (DIVERGED_FLAG, SPIKES, MAX_ACT)


@dataclass(frozen=True)
class Stability:
    curve: pl.DataFrame  # per (ladder, lr): see the module docstring
    summary: pl.DataFrame  # per ladder: variant, best_lr, best_value, max_stable_lr, n_lrs...
    rule: str  # the rule and tolerance in one sentence


def rule_text(metric: str, tol: float) -> str:
    return (f"An LR is stable when no seed diverged and its mean final {metric} is within "
            f"{tol:.0%} of the variant's best LR (mean <= best x {1 + tol:g}); max stable LR "
            f"is the largest LR reached from the best LR upwards through stable LRs only; "
            f"ties are ordered by the degradation at the largest LR tried.")


def _points(runs: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Per (ladder, lr), ladders in order of their first run, LRs ascending: n, mean, std,
    CI over the seeds that neither diverged nor ended non-finite, diverged, loss_spikes
    (sum of the finite counts; null without any), max_activation (largest finite)."""
    import polars as pl

    flag = pl.col(DIVERGED_FLAG).fill_null(0.0).fill_nan(0.0) > 0  # NaN flag: not a flag
    bad = (pl.col("status") == "diverged") | flag | ~pl.col(metric).is_finite().fill_null(False)
    ok = ~bad & pl.col("status").is_in(list(RESULT_STATES))
    spikes = pl.col(SPIKES).filter(pl.col(SPIKES).is_finite().fill_null(False))
    acts = pl.col(MAX_ACT).filter(pl.col(MAX_ACT).is_finite().fill_null(False))
    r = runs.filter(pl.col("lr").is_not_null()).sort("run_id")
    names = r.group_by("lr_group_key", maintain_order=True).agg(
        variant=pl.col("variant").unique(maintain_order=True).str.join(","))
    names = names.with_row_index("_ladder")
    pts = r.group_by("lr_group_key", "lr").agg(
        n=pl.len().cast(pl.Int64), _k=ok.sum().cast(pl.Int64),
        mean=pl.col(metric).filter(ok).mean(), std=pl.col(metric).filter(ok).std(),
        diverged=bad.sum().cast(pl.Int64),
        loss_spikes=pl.when(spikes.count() > 0).then(spikes.sum()),
        max_activation=acts.max())
    pts = pts.join(names, on="lr_group_key").sort("_ladder", "lr")
    k = pl.col("_k")
    pts = pts.with_columns(_t=t_column(pts.select(pl.when(k >= 2).then(k - 1)).to_series()))
    half = pl.col("_t") * pl.col("std") / pl.col("_k").cast(pl.Float64).sqrt()
    return pts.with_columns(ci_low=pl.col("mean") - half, ci_high=pl.col("mean") + half)


def _ladders(pts: pl.DataFrame, tol: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Marks rel_to_best/degraded/stable on every point and summarises every ladder (module
    docstring) with window expressions over the ladder (points sorted by lr)."""
    import polars as pl

    lad = "lr_group_key"
    mean, div, lr = pl.col("mean"), pl.col("diverged"), pl.col("lr")
    okp = (div == 0) & mean.is_not_null()
    pts = pts.with_columns(_i=pl.int_range(pl.len()).over(lad),
                           _best=mean.filter(okp).min().over(lad))
    # the first (lowest-lr) point at the best mean: Python's min() over the sorted ladder
    best_i = pl.col("_i").filter(okp & (mean == pl.col("_best"))).min().over(lad)
    rel = pl.when(pl.col("_best").is_not_null() & (pl.col("_best") != 0))\
        .then(mean / pl.col("_best") - 1)
    pts = pts.with_columns(_bi=best_i, rel_to_best=rel).with_columns(
        degraded=((div == 0) & pl.col("rel_to_best").is_not_null()
                  & (pl.col("rel_to_best") > tol)),
        stable=((div == 0) & pl.col("rel_to_best").is_not_null()
                & (pl.col("rel_to_best") <= tol)))
    after = pl.col("_i") >= pl.col("_bi")
    stop = pl.col("_i").filter(after & ~pl.col("stable")).min().over(lad)  # first failure
    pts = pts.with_columns(_run=after & (stop.is_null() | (pl.col("_i") < stop)))
    msl = lr.filter(pl.col("_run")).max()
    summary = pts.group_by(lad, maintain_order=True).agg(
        variant=pl.col("variant").first(), best_lr=lr.filter(pl.col("_i") == pl.col("_bi"))
        .first(), best_value=pl.col("_best").first(), max_stable_lr=msl,
        n_lrs=pl.len().cast(pl.Int64), lrs=lr, min_diverged_lr=lr.filter(div > 0).min(),
        value_at_max=mean.filter(lr == msl).first(), top_lr=lr.last(),
        rel_at_top_lr=pl.when(div.last() > 0).then(float("inf"))
        .otherwise(pl.col("rel_to_best").last()))
    return pts, summary


def analyse(runs: pl.DataFrame, metric: str = "val/loss", tol: float = 0.05) -> Stability:
    """``runs``: one row per finished run with variant, lr, lr_group_key, run_id, status and
    one column per metric in (metric, *EXTRA_METRICS) (null where not logged). Every ladder
    at once (polars; the t quantiles once per distinct seed count)."""
    import polars as pl

    if not 0 <= tol < 10:
        raise ValueError(f"stability: tol is a relative fraction (0.05 = 5 %), got {tol}")
    if higher_is_better(metric):
        raise ValueError(f"stability: {metric!r} is higher-is-better; the LR rule needs a "
                         f"loss-like metric (val/loss, val/ppl)")
    runs = runs.with_columns(pl.col(c).cast(pl.Float64) for c in (metric, *EXTRA_METRICS))
    curve, summary = _ladders(_points(runs, metric), tol)
    return Stability(_curve_frame(curve), _summary_frame(summary), rule_text(metric, tol))


_CURVE = {"lr_group_key": "String", "variant": "String", "lr": "Float64", "n": "Int64",
          "mean": "Float64", "std": "Float64", "ci_low": "Float64", "ci_high": "Float64",
          "rel_to_best": "Float64", "max_activation": "Float64", "loss_spikes": "Float64",
          "diverged": "Int64", "degraded": "Boolean", "stable": "Boolean"}
_SUMMARY = {"lr_group_key": "String", "variant": "String", "best_lr": "Float64",
            "best_value": "Float64", "max_stable_lr": "Float64", "n_lrs": "Int64",
            "lrs": "List(Float64)", "min_diverged_lr": "Float64", "value_at_max": "Float64",
            "top_lr": "Float64", "rel_at_top_lr": "Float64"}


def _dtype(name: str) -> Any:
    import polars as pl

    return pl.List(pl.Float64) if name == "List(Float64)" else getattr(pl, name)


def _curve_frame(points: pl.DataFrame) -> pl.DataFrame:
    schema: dict[Any, Any] = {c: _dtype(t) for c, t in _CURVE.items()}
    return points.select(list(schema)).cast(schema)


def _summary_frame(summary: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    schema: dict[Any, Any] = {c: _dtype(t) for c, t in _SUMMARY.items()}
    df = summary.select(list(schema)).cast(schema)
    return df.sort(pl.col("max_stable_lr"), pl.col("rel_at_top_lr"), "variant",
                   descending=[True, False, False], nulls_last=True)
