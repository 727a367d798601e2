"""Seed statistics and the uncertainty of a delta vs the baseline (t quantiles: tdist.py, scipy).

- ``describe(values)``: n, mean, sample std (ddof=1; None for one value).
- ``delta_ci(x, base)``: the 95 % CI of mean(x) - mean(base):
  * **paired** when both groups ran the same seeds (same set, >= 2): the seed is shared by the
    data order and the init, so per-seed differences d_i = x_i - b_i cancel that part of the
    noise; CI = mean(d) +- t(0.975, n-1) * sd(d) / sqrt(n).
  * **welch** otherwise, when both groups have >= 2 values: se = sqrt(s1²/n1 + s2²/n2),
    Welch-Satterthwaite df.
  * **none** when either side has a single value (no variance estimate, no CI).
  Small n: we use the exact Student-t interval, which is *wide* at n = 2 (t = 12.7 for one
  df) -- honest, where a bootstrap over 2-3 seeds has only a handful of distinct resamples
  and returns intervals far too narrow. So ``ci_method`` is never "bootstrap".
- ``seeds_needed(rel_std, min_effect)``: seeds per variant for a two-sided 5 % test to detect
  a relative effect ``min_effect`` with 80 % power, from the observed relative std
  (``seeds_needed_many``: the same for a whole column; the scalar is that on one element).
- ``t_quantile(p, df)`` / ``t_quantiles(p, dfs)``: Student-t quantiles (tdist.py).

These scalar functions are the written-out definition (the tests pin them to hand-computed
values); compare.py, effects.py and stability.py compute the same formulas as polars
expressions over all groups at once, with the t quantiles looked up once per distinct df, and
tests/results_db/test_analysis_vectorised.py checks that the two agree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

from contract.analysis_defaults import MIN_EFFECT
from results_db.analysis.tdist import t_quantile, t_quantiles

__all__ = ["LEVEL", "MAX_SEEDS", "POWER", "DeltaCI", "Described", "delta_ci",
           "describe", "seeds_needed", "seeds_needed_many", "t_column",
           "t_quantile", "t_quantiles"]

LEVEL = 0.95
POWER = 0.8
MAX_SEEDS = 1000  # seeds_needed caps here: "more than we can run" reads the same above it


@dataclass(frozen=True)
class Described:
    n: int
    mean: float | None
    std: float | None  # sample std (ddof=1); None for n < 2


def fmean(values: Iterable[float]) -> float:
    """THE mean of the analysis: math.fsum's exact sum over n; where that sum leaves the
    floats (values near 1e308) the mean of the scaled values, which does not (fsum raises)."""
    vals = list(values)
    try:
        return math.fsum(vals) / len(vals)
    except OverflowError:
        return math.fsum(v / len(vals) for v in vals)


def sum_sq(values: Iterable[float], mean: float) -> float:
    """Sum of squared deviations; inf, never OverflowError (``**`` raises past the floats)."""
    return math.fsum((v - mean) * (v - mean) for v in values)


def describe(values: Sequence[float]) -> Described:
    n = len(values)
    if n == 0:
        return Described(0, None, None)
    mean = fmean(values)
    if n < 2:
        return Described(n, mean, None)
    var = sum_sq(values, mean) / (n - 1)
    return Described(n, mean, math.sqrt(var))


# --- delta CI ------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeltaCI:
    delta: float | None
    low: float | None
    high: float | None
    method: str  # "paired" | "welch" | "none"
    df: float | None
    # std of what the CI is about, for seeds_needed: sd of the paired differences, or the
    # root mean square of the two groups' stds (Welch); None without a CI
    spread: float | None


def _paired(x: dict[int, float], b: dict[int, float], level: float) -> DeltaCI:
    diffs = [x[s] - b[s] for s in sorted(x)]
    d = describe(diffs)
    assert d.mean is not None and d.std is not None
    half = t_quantile(0.5 + level / 2, d.n - 1) * d.std / math.sqrt(d.n)
    return DeltaCI(d.mean, d.mean - half, d.mean + half, "paired", d.n - 1, d.std)


def _welch(x: Sequence[float], b: Sequence[float], level: float) -> DeltaCI:
    dx, db = describe(x), describe(b)
    assert dx.mean is not None and db.mean is not None
    assert dx.std is not None and db.std is not None
    delta = dx.mean - db.mean
    vx, vb = dx.std ** 2 / dx.n, db.std ** 2 / db.n
    se = math.sqrt(vx + vb)
    spread = math.sqrt((dx.std ** 2 + db.std ** 2) / 2)
    if se == 0.0:  # no seed noise at all on either side: the delta is exact
        return DeltaCI(delta, delta, delta, "welch", float(dx.n + db.n - 2), spread)
    df = (vx + vb) ** 2 / (vx ** 2 / (dx.n - 1) + vb ** 2 / (db.n - 1))
    half = t_quantile(0.5 + level / 2, df) * se
    return DeltaCI(delta, delta - half, delta + half, "welch", df, spread)


def delta_ci(x: Sequence[float], base: Sequence[float], x_seeds: Sequence[int] | None = None,
             base_seeds: Sequence[int] | None = None, level: float = LEVEL) -> DeltaCI:
    """CI of mean(x) - mean(base) -- paired when the seed sets match, else Welch (module
    docstring). Values must be finite; seeds (when given) align with the values."""
    dx, db = describe(x), describe(base)
    if dx.mean is None or db.mean is None:
        return DeltaCI(None, None, None, "none", None, None)
    delta = dx.mean - db.mean
    if x_seeds is not None and base_seeds is not None and len(x) >= 2 \
            and len(set(x_seeds)) == len(x) and len(set(base_seeds)) == len(base) \
            and set(x_seeds) == set(base_seeds):
        return _paired(dict(zip(x_seeds, x, strict=True)),
                       dict(zip(base_seeds, base, strict=True)), level)
    if dx.n >= 2 and db.n >= 2:
        return _welch(x, base, level)
    return DeltaCI(delta, None, None, "none", None, None)


def t_column(df: pl.Series, level: float = LEVEL) -> pl.Series:
    """The two-sided ``level`` Student-t quantile at each element's df (null where the df is
    null): one t_quantiles call over the distinct dfs, then a lookup -- how the vectorised
    tables get their t without a per-group call."""
    df = df.cast(pl.Float64)
    q = t_quantiles(0.5 + level / 2, df.drop_nulls().unique().to_list())
    return df.replace_strict(q, default=None, return_dtype=pl.Float64)


@lru_cache(maxsize=16)
def _power_curve(paired: bool, level: float, power: float) -> tuple[float, ...]:
    """(t(level_q, df) + t(power, df)) * sqrt(k / n) for n = 2 .. MAX_SEEDS (index n - 2):
    strictly decreasing in n (both the quantiles and sqrt(k / n) fall)."""
    k = 1.0 if paired else 2.0
    ns = range(2, MAX_SEEDS + 1)
    dfs = [float(n - 1 if paired else 2 * n - 2) for n in ns]
    q_level, q_power = t_quantiles(0.5 + level / 2, dfs), t_quantiles(power, dfs)
    return tuple((q_level[df] + q_power[df]) * math.sqrt(k / n)
                 for n, df in zip(ns, dfs, strict=True))


def seeds_needed_many(rel_std: pl.Series, min_effect: float, paired: pl.Series, *,
                      level: float = LEVEL, power: float = POWER) -> pl.Series:
    """seeds_needed for every element at once (Int64; null where ``rel_std`` is null):
    the smallest n in 2..MAX_SEEDS with curve(n) <= min_effect / rel_std, found by a binary
    search (search_sorted) in the power curve (computed once per process); MAX_SEEDS when
    none is."""
    if not min_effect > 0:
        raise ValueError(f"seeds_needed: min_effect is a relative effect > 0 (0.01 = 1 %), "
                         f"got {min_effect}")
    out = pl.Series("seeds_needed", [None] * len(rel_std), dtype=pl.Int64)
    limit = -(min_effect / rel_std.cast(pl.Float64))  # rel_std 0 -> -inf -> n = 2
    for flag in (False, True):
        rising = -pl.Series(_power_curve(flag, level, power))  # ascending
        n = (rising.search_sorted(limit.fill_null(0.0), side="left").cast(pl.Int64) + 2) \
            .clip(upper_bound=MAX_SEEDS)
        pick = (paired.fill_null(False) == flag) & rel_std.is_not_null()
        out = pl.select(pl.when(pick).then(n).otherwise(out)).to_series()
    return out.alias("seeds_needed")


def seeds_needed(rel_std: float, min_effect: float = MIN_EFFECT, *, paired: bool = False,
                 level: float = LEVEL, power: float = POWER) -> int:
    """Seeds per variant to detect a relative effect ``min_effect`` (0.01 = 1 %) with a
    two-sided test at ``level`` and ``power``, given the relative seed std ``rel_std``
    (std / |baseline mean|; for ``paired`` the relative std of per-seed differences).

    Smallest n >= 2 with (t(level_q, df) + t(power, df)) * sqrt(k / n) * rel_std <= min_effect,
    k = 2, df = 2n - 2 for two independent groups of n seeds; k = 1, df = n - 1 paired.
    Capped at MAX_SEEDS. (seeds_needed_many on one element: one rule.)"""
    if not rel_std >= 0 or math.isinf(rel_std):
        raise ValueError(f"seeds_needed: rel_std must be finite and >= 0, got {rel_std}")
    k = seeds_needed_many(pl.Series([float(rel_std)]), min_effect, pl.Series([paired]),
                          level=level, power=power)
    return int(k[0])
