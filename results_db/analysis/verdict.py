"""The verdict of one row vs the baseline, from its delta CI (results_db.VERDICTS).

In order:
- ``baseline``: the row is the baseline itself;
- ``no data``: no finite value on this row, or no baseline value to compare with (no baseline
  in the sweep, or none at this point of the sweep's axes: compare.py);
- ``n = 1``: one side has a single seed, so there is no variance and no CI;
- ``better`` / ``worse``: the 95 % CI of the delta excludes 0 (direction by the metric:
  lower is better for losses/PPL, higher for benchmark scores);
- ``within noise``: the CI contains 0 and lies within +-min_effect x |baseline mean| (default
  1 %): the data rule out an effect of that size. Nothing else earns it -- not the seed count
  of one side (10 variant seeds against a 2-seed baseline still give a wide CI), not a
  baseline mean of 0 (no relative margin exists then);
- ``needs >= k seeds``: the CI contains 0 and is too wide to tell, and k = seeds_needed(...)
  (from the observed seed std, results_db/analysis/stats.py) is more than the *smaller* of
  the two groups' seed counts: both groups need k;
- ``inconclusive``: the CI contains 0 and is too wide, but both groups already have the k
  seeds the power rule asks for (the observed spread was unlucky), or the baseline mean is 0
  so that no relative margin (and no seeds_needed) exists.

``interval_verdict`` is the same rule for any other interval with a stated margin (a main
effect, a scaling slope, the change at equal compute): better / worse when it excludes 0,
within noise only when it lies inside +-margin, else inconclusive -- never "within noise"
because it merely contains 0.
"""

from __future__ import annotations

import polars as pl

from results_db.schema.vocab import NEEDS_SEEDS

BETTER, WORSE, WITHIN, INCONCLUSIVE = "better", "worse", "within noise", "inconclusive"


def interval_verdict(low: float, high: float, margin: float | None, *,
                     higher_is_better: bool) -> str:
    """better / worse (the interval [low, high] excludes 0; by the metric's direction),
    within noise (it contains 0 and lies inside [-margin, +margin]), else inconclusive.
    ``margin`` None: no margin exists (e.g. a baseline mean of 0), so never within noise."""
    if high < 0 or low > 0:
        return BETTER if (low > 0) == higher_is_better else WORSE
    if margin is not None and -margin <= low and high <= margin:
        return WITHIN
    return INCONCLUSIVE


def verdict_expr(*, higher_is_better: bool, min_effect: float) -> pl.Expr:
    """The verdict of every row at once (module docstring), over the columns is_baseline, n,
    base_n, delta, base_mean, ci_method, ci_low, ci_high and seeds_needed of compare.py's
    frame."""
    low, high, k = pl.col("ci_low"), pl.col("ci_high"), pl.col("seeds_needed")
    bmean = pl.col("base_mean")
    margin = min_effect * bmean.abs()
    improved = low > 0 if higher_is_better else high < 0
    fewest = pl.min_horizontal(pl.col("n"), pl.col("base_n"))
    before, after = NEEDS_SEEDS.split("{k}")
    return (pl.when(pl.col("is_baseline")).then(pl.lit("baseline"))
            .when((pl.col("n") == 0) | pl.col("delta").is_null()
                  | bmean.is_null()).then(pl.lit("no data"))
            .when((pl.col("ci_method") == "none") | low.is_null() | high.is_null())
            .then(pl.lit("n = 1"))
            .when((high < 0) | (low > 0))
            .then(pl.when(improved).then(pl.lit(BETTER)).otherwise(pl.lit(WORSE)))
            .when((bmean != 0) & (-margin <= low) & (high <= margin))
            .then(pl.lit(WITHIN))
            .when(k.is_not_null() & (k > fewest))
            .then(pl.lit(before) + k.cast(pl.String) + pl.lit(after))
            .otherwise(pl.lit(INCONCLUSIVE)))
