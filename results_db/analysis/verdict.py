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

from results_db.analysis.stats import DeltaCI, seeds_needed
from results_db.vocab import NEEDS_SEEDS


def needed(ci: DeltaCI, base_mean: float | None, min_effect: float) -> int | None:
    """seeds_needed for this comparison (None without a spread or a baseline mean)."""
    if ci.spread is None or not base_mean:
        return None
    return seeds_needed(ci.spread / abs(base_mean), min_effect, paired=ci.method == "paired")


def verdict(ci: DeltaCI, *, is_baseline: bool, n: int, base_mean: float | None,
            higher_is_better: bool, min_effect: float, k: int | None) -> str:
    """The row's verdict (module docstring); ``k`` is ``needed(...)``."""
    if is_baseline:
        return "baseline"
    if n == 0 or ci.delta is None or base_mean is None:
        return "no data"
    if ci.method == "none" or ci.low is None or ci.high is None:
        return "n = 1"
    if ci.high < 0 or ci.low > 0:
        improved = ci.high < 0 if not higher_is_better else ci.low > 0
        return "better" if improved else "worse"
    margin = min_effect * abs(base_mean)
    if (-margin <= ci.low and ci.high <= margin) or k is None or k <= n:
        return "within noise"
    return NEEDS_SEEDS.format(k=k)
