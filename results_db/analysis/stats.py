"""Seed statistics and the uncertainty of a delta vs the baseline (pure math, no numpy/scipy).

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
  a relative effect ``min_effect`` with 80 % power, from the observed relative std.
- ``t_quantile(p, df)``: Student-t quantiles via the regularized incomplete beta function
  (continued fraction, Numerical Recipes 6.4) and a safeguarded Newton iteration; closed forms
  for df 1 and 2, the Cornish-Fisher series above df 60.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

LEVEL = 0.95
POWER = 0.8
MAX_SEEDS = 1000  # seeds_needed caps here: "more than we can run" reads the same above it


@dataclass(frozen=True)
class Described:
    n: int
    mean: float | None
    std: float | None  # sample std (ddof=1); None for n < 2


def describe(values: Sequence[float]) -> Described:
    n = len(values)
    if n == 0:
        return Described(0, None, None)
    mean = math.fsum(values) / n
    if n < 2:
        return Described(n, mean, None)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return Described(n, mean, math.sqrt(var))


# --- Student t -------------------------------------------------------------------------------
def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(ln_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _t_pdf(t: float, df: float) -> float:
    ln = (math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
          - (df + 1) / 2 * math.log1p(t * t / df))
    return math.exp(ln)


LARGE_DF = 60.0  # above: the Cornish-Fisher series (relative error < 1e-8), no root finding


def _cornish_fisher(p: float, df: float) -> float:
    """t quantile from the normal one by its asymptotic series in 1/df (Abramowitz & Stegun
    26.7.5): fast where the incomplete-beta iteration is slowest."""
    z = NormalDist().inv_cdf(p)
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


@lru_cache(maxsize=4096)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (df > 0, 0 < p < 1)."""
    if not 0.0 < p < 1.0 or not df > 0:
        raise ValueError(f"t_quantile: need 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    if df >= LARGE_DF:
        return _cornish_fisher(p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:  # bracket the root
        lo, hi = hi, hi * 2.0
    t = (lo + hi) / 2.0
    for _ in range(100):  # Newton, falling back to bisection when it leaves the bracket
        f = t_cdf(t, df) - p
        if abs(f) < 1e-14:
            break
        lo, hi = (t, hi) if f < 0 else (lo, t)
        step = t - f / _t_pdf(t, df)
        t = step if lo < step < hi else (lo + hi) / 2.0
        if hi - lo < 1e-13 * max(1.0, hi):
            break
    return t


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


def mean_ci(values: Sequence[float], level: float = LEVEL) -> tuple[float | None, float | None]:
    """t-interval of the mean of ``values`` (None, None for fewer than 2)."""
    d = describe(values)
    if d.std is None or d.mean is None:
        return None, None
    half = t_quantile(0.5 + level / 2, d.n - 1) * d.std / math.sqrt(d.n)
    return d.mean - half, d.mean + half


def seeds_needed(rel_std: float, min_effect: float = 0.01, *, paired: bool = False,
                 level: float = LEVEL, power: float = POWER) -> int:
    """Seeds per variant to detect a relative effect ``min_effect`` (0.01 = 1 %) with a
    two-sided test at ``level`` and ``power``, given the relative seed std ``rel_std``
    (std / |baseline mean|; for ``paired`` the relative std of per-seed differences).

    Smallest n >= 2 with (t(level_q, df) + t(power, df)) * rel_std * sqrt(k / n) <= min_effect,
    k = 2, df = 2n - 2 for two independent groups of n seeds; k = 1, df = n - 1 paired.
    Capped at MAX_SEEDS."""
    if not min_effect > 0:
        raise ValueError(f"seeds_needed: min_effect is a relative effect > 0 (0.01 = 1 %), "
                         f"got {min_effect}")
    if not rel_std >= 0 or math.isinf(rel_std):
        raise ValueError(f"seeds_needed: rel_std must be finite and >= 0, got {rel_std}")
    k = 1.0 if paired else 2.0

    def enough(n: int) -> bool:
        df = n - 1 if paired else 2 * n - 2
        z = t_quantile(0.5 + level / 2, df) + t_quantile(power, df)
        return z * rel_std * math.sqrt(k / n) <= min_effect

    if enough(2):
        return 2
    lo, hi = 2, 4
    while not enough(hi):  # enough() is monotone in n: double, then bisect
        if hi >= MAX_SEEDS:
            return MAX_SEEDS
        lo, hi = hi, min(hi * 2, MAX_SEEDS)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return hi
