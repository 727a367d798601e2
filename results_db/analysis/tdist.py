"""Student's t distribution: quantiles for one df or for many at once (no scipy).

One algorithm, written over numpy arrays so that a table of thousands of groups gets all its
quantiles in one pass (``t_quantiles``); the scalar ``t_quantile`` runs the same code on an
array of one and caches it.

- ``betainc(a, b, x)``: regularized incomplete beta, continued fraction (Numerical Recipes 6.4,
  modified Lentz), iterated on every element until all have converged.
- ``t_cdf(t, df)`` from it; ``t_quantile(p, df)``: closed forms for df 1 and 2, the
  Cornish-Fisher series (Abramowitz & Stegun 26.7.5, relative error < 1e-8) from df 60 up,
  else a safeguarded Newton iteration on t_cdf (bisection whenever a step leaves the bracket).

numpy is imported inside the functions (it comes with the project's environment; keeping it
off ``import results_db``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Arr = NDArray[np.float64]

LARGE_DF = 60.0  # from here on: the Cornish-Fisher series, no root finding
_TINY, _EPS = 1e-300, 1e-15
_CACHE: dict[tuple[float, float], float] = {}  # (p, df) -> quantile; cleared when large
_CACHE_MAX = 200_000


def _lgamma(x: Arr) -> Arr:
    import numpy as np

    return np.fromiter((math.lgamma(v) for v in x.tolist()), np.float64, len(x))


def _nonzero(v: Arr) -> Arr:
    import numpy as np

    return np.where(np.abs(v) > _TINY, v, _TINY)


def _betacf(a: Arr, b: Arr, x: Arr) -> Arr:
    """Continued fraction of the incomplete beta (modified Lentz), elementwise; an element
    stops changing once its own term is within 1e-15 of 1."""
    import numpy as np

    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 / _nonzero(1.0 - qab * x / qap)
    h = d.copy()
    done = np.zeros(x.shape, dtype=bool)
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / _nonzero(1.0 + aa * d)
        c = _nonzero(1.0 + aa / c)
        h = np.where(done, h, h * d * c)
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / _nonzero(1.0 + aa * d)
        c = _nonzero(1.0 + aa / c)
        delta = d * c
        h = np.where(done, h, h * delta)
        done |= np.abs(delta - 1.0) < _EPS
        if done.all():
            break
    return h


def _betainc(a: Arr, b: Arr, x: Arr, ln_beta: Arr) -> Arr:
    """I_x(a, b) for 0 < x < 1; ``ln_beta`` = lgamma(a + b) - lgamma(a) - lgamma(b)."""
    import numpy as np

    front = np.exp(ln_beta + a * np.log(x) + b * np.log1p(-x))
    lower = x < (a + 1.0) / (a + b + 2.0)  # the fraction converges fast on this side
    out = np.empty_like(x)
    if lower.any():
        out[lower] = front[lower] * _betacf(a[lower], b[lower], x[lower]) / a[lower]
    up = ~lower
    if up.any():
        out[up] = 1.0 - front[up] * _betacf(b[up], a[up], 1.0 - x[up]) / b[up]
    return out


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    import numpy as np

    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lb = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    return float(_betainc(np.array([a]), np.array([b]), np.array([x]), np.array([lb]))[0])


class _Df:
    """Per-df constants of the t density and cdf, computed once per df."""

    def __init__(self, df: Arr) -> None:
        import numpy as np

        self.df = df
        self.ln_beta = _lgamma(df / 2 + 0.5) - _lgamma(df / 2) - math.lgamma(0.5)
        self.ln_pdf = _lgamma((df + 1) / 2) - _lgamma(df / 2) - 0.5 * np.log(df * math.pi)

    def cdf(self, t: Arr) -> Arr:
        """P(T <= t), elementwise with this df."""
        import numpy as np

        x = self.df / (self.df + t * t)
        tail = 0.5 * _betainc(self.df / 2.0, np.full_like(x, 0.5), x, self.ln_beta)
        return np.where(t > 0, 1.0 - tail, tail)

    def pdf(self, t: Arr) -> Arr:
        import numpy as np

        return np.exp(self.ln_pdf - (self.df + 1) / 2 * np.log1p(t * t / self.df))


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    import numpy as np

    return float(_Df(np.array([float(df)])).cdf(np.array([float(t)]))[0])


def _newton(p: float, df: Arr) -> Arr:
    """The p (> 0.5) quantiles for these dfs: a bracket [0, hi] (doubled until it holds the
    root), then Newton steps from the series value that fall back to bisection when they leave
    the bracket; each element stops on its own test."""
    import numpy as np

    dist = _Df(df)
    # start from the Cornish-Fisher value (close from df ~3 up: 3-4 Newton steps, not ~12)
    guess = np.array([_cornish_fisher(p, d) for d in df.tolist()])
    lo, hi = np.zeros_like(df), np.maximum(2.0 * guess, 1.0)
    while (low := dist.cdf(hi) < p).any():
        lo, hi = np.where(low, hi, lo), np.where(low, hi * 2.0, hi)
    t = np.clip(guess, lo, hi)
    t = np.where((t > lo) & (t < hi), t, (lo + hi) / 2.0)
    active = np.ones(df.shape, dtype=bool)
    for _ in range(100):
        f = dist.cdf(t) - p
        active &= ~(np.abs(f) < 1e-14)
        if not active.any():
            break
        lo = np.where(active & (f < 0), t, lo)
        hi = np.where(active & (f >= 0), t, hi)
        step = t - f / dist.pdf(t)
        inside = (lo < step) & (step < hi)
        t = np.where(active, np.where(inside, step, (lo + hi) / 2.0), t)
        active &= ~(hi - lo < 1e-13 * np.maximum(1.0, hi))
    return t


def _cornish_fisher(p: float, df: float) -> float:
    """t quantile from the normal one by its asymptotic series in 1/df."""
    z = NormalDist().inv_cdf(p)
    z2 = z * z
    g1 = (z2 + 1) * z / 4
    g2 = ((5 * z2 + 16) * z2 + 3) * z / 96
    g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384
    g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4


def _closed(p: float, df: float) -> float | None:
    """The quantile where no iteration is needed (p >= 0.5), else None."""
    if p == 0.5:
        return 0.0
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    if df >= LARGE_DF:
        return _cornish_fisher(p, df)
    return None


def t_quantiles(p: float, dfs: Iterable[float]) -> dict[float, float]:
    """{df: the ``p`` quantile of Student's t} for every distinct df (each > 0), the ones
    that need the iteration solved together in one array pass."""
    import numpy as np

    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile: need 0 < p < 1 and df > 0, got p={p}")
    q, sign = (1.0 - p, -1.0) if p < 0.5 else (p, 1.0)
    out: dict[float, float] = {}
    todo = []
    for df in {float(d) for d in dfs}:
        if not df > 0:
            raise ValueError(f"t_quantile: need 0 < p < 1 and df > 0, got p={p}, df={df}")
        hit = _CACHE.get((q, df))
        if hit is None:
            hit = _closed(q, df)
        if hit is None:
            todo.append(df)
        else:
            out[df] = sign * hit
    if todo:
        if len(_CACHE) > _CACHE_MAX:
            _CACHE.clear()
        for df, t in zip(todo, _newton(q, np.array(todo)).tolist(), strict=True):
            _CACHE[q, df] = t
            out[df] = sign * t
    return out


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (df > 0, 0 < p < 1)."""
    if not df > 0:
        raise ValueError(f"t_quantile: need 0 < p < 1 and df > 0, got p={p}, df={df}")
    return t_quantiles(p, (df,))[float(df)]
