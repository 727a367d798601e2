"""The verdict of one row vs the baseline, from its delta CI (results_db.VERDICTS).

In order:
- ``baseline``: the row is the baseline itself;
- ``no data``: no finite value on this row, or no baseline value to compare with (no baseline
  in the sweep, or none at this learning rate);
- ``n = 1``: one side has a single seed, so there is no variance and no CI;
- ``better`` / ``worse``: the 95 % CI of the delta excludes 0 (direction by the metric:
  lower is better for losses/PPL, higher for benchmark scores);
- ``within noise``: the CI contains 0 and is already narrow enough to rule out an effect of
  ``min_effect`` (relative to the baseline mean, default 1 %) -- the CI lies within
  +-min_effect -- or the row already has the seeds that ``seeds_needed`` asks for;
- ``needs >= k seeds``: the CI contains 0 but is too wide to tell; k = seeds_needed(...)
  from the observed seed std (results_db/analysis/stats.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from results_db.vocab import NEEDS_SEEDS

if TYPE_CHECKING:
    import polars as pl


def verdict_expr(*, higher_is_better: bool, min_effect: float) -> pl.Expr:
    """The verdict of every row at once (module docstring), over the columns is_baseline, n,
    delta, base_mean, ci_method, ci_low, ci_high and seeds_needed of compare.py's frame."""
    import polars as pl

    low, high, k = pl.col("ci_low"), pl.col("ci_high"), pl.col("seeds_needed")
    margin = min_effect * pl.col("base_mean").abs()
    improved = low > 0 if higher_is_better else high < 0
    before, after = NEEDS_SEEDS.split("{k}")
    return (pl.when(pl.col("is_baseline")).then(pl.lit("baseline"))
            .when((pl.col("n") == 0) | pl.col("delta").is_null()
                  | pl.col("base_mean").is_null()).then(pl.lit("no data"))
            .when((pl.col("ci_method") == "none") | low.is_null() | high.is_null())
            .then(pl.lit("n = 1"))
            .when((high < 0) | (low > 0))
            .then(pl.when(improved).then(pl.lit("better")).otherwise(pl.lit("worse")))
            .when(((-margin <= low) & (high <= margin)) | k.is_null() | (k <= pl.col("n")))
            .then(pl.lit("within noise"))
            .otherwise(pl.lit(before) + k.cast(pl.String) + pl.lit(after)))
