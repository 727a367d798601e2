"""A distribution-free anytime-valid confidence sequence for the median of a paired per-seed
difference: the rule for rows whose differences are not Gaussian (``decide: {test: sign}``).

The mixture t of confseq.py assumes d_1..d_n ~ N(mu, sigma^2). Seed noise in training is often
skewed (a baseline's unstable seeds give a long tail), and there the mixture t can miss its
level (benchmarks/decide_sim.py measures it). This rule assumes only that the pairs are
independent and that the differences have a continuous distribution with median m.

Under "the median is m", the signs 1[d_i > m] are i.i.d. Bernoulli(1/2). Mixing the Bernoulli
likelihood ratio over p ~ Beta(a, a) gives the test martingale (Robbins 1970; the conjugate
mixture of Howard, Ramdas, McAuliffe & Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic
confidence sequences", and the quantile sequences of Howard & Ramdas 2022, "Sequential
estimation of quantiles with applications to A/B-testing and best-arm identification")

    M_n(m) = B(k + a, n - k + a) / B(a, a) * 2^n,      k = #{i <= n : d_i > m},

so by Ville's inequality P(sup_n M_n(median) >= 1 / alpha) <= alpha. The confidence sequence
{m : M_n(m) < 1 / alpha} depends on m only through k, and M_n grows as k moves away from n / 2,
so at look n it is the interval between two order statistics [d_(j), d_(n+1-j)]
(d_(0) = -inf). Intersected over looks it stays valid and never widens; the anytime p-value of
"median 0" is min(1, 1 / max_k M_k(0)). A pair whose variant diverged and whose baseline did
not is d = +inf (or -inf the other way): its sign is known, its size is not, and a sign rule
needs no more. Ties at m (d_i = m exactly) carry no sign and are left out of that m's count.

The cost: a sign carries less than a value, so on Gaussian differences this rule needs more
seeds than the mixture t for the same effect (decide_sim prints both). ``A = 1`` (a uniform
prior on p) is the classic Robbins mixture.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from results_db.analysis.confseq import Reading

A = 1.0  # Beta(A, A) mixing prior on P(d > m) (module docstring)
MIN_LOOK = 1  # one sign already carries evidence, but no interval is bounded before ~log2(1/a)


def log_martingale(k: np.ndarray | int, n: int, a: float = A) -> np.ndarray:
    """log M_n for k of n signs above m (module docstring)."""
    from scipy.special import betaln  # scipy: 0.3 s that `import results_db` does not pay

    k = np.asarray(k, dtype=float)
    out: np.ndarray = betaln(k + a, n - k + a) - betaln(a, a) + n * math.log(2.0)
    return out


def ranks(n: int, alpha: float, a: float = A) -> tuple[int, int]:
    """(i, j): at a look of n differences the interval is [d_(i), d_(j)] in 1-based order
    statistics with d_(0) = -inf and d_(n+1) = +inf -- the medians m whose count of
    differences above m keeps M_n(m) under 1 / alpha. Depends on n and alpha only."""
    below = np.arange(n + 1)  # j values at or below m -> k = n - j above it
    inside = log_martingale(n - below, n, a) < -math.log(alpha)
    if not inside.any():  # cannot happen: k = n / 2 has M_n <= 1; kept for safety
        return 0, n + 1
    return int(np.argmax(inside)), int(n - np.argmax(inside[::-1])) + 1


def _look(sorted_d: np.ndarray, alpha: float, a: float) -> tuple[float, float]:
    """[d_(i), d_(j)] at one look (ranks)."""
    i, j = ranks(len(sorted_d), alpha, a)
    padded = np.concatenate(([-math.inf], sorted_d, [math.inf]))
    return float(padded[i]), float(padded[j])


def read(d: Sequence[float] | np.ndarray, alpha: float, a: float = A) -> Reading:
    """The sign confidence sequence of the median of ``d`` (in the order the pairs were read;
    +-inf for one-sided divergences), at level 1 - alpha after every prefix, intersected; the
    last reading. ``mean`` and ``sd`` of the Reading are the median of d and None: this rule
    estimates a median, not a mean."""
    x = np.asarray(d, dtype=float)
    n = len(x)
    low, high, best = -math.inf, math.inf, 0.0
    for k in range(MIN_LOOK, n + 1):
        head = x[:k]
        lo, hi = _look(np.sort(head), alpha, a)
        low, high = max(low, lo), min(high, hi)
        signed = head[head != 0.0]
        best = max(best, float(log_martingale(int((signed > 0).sum()), len(signed), a)))
    if low > high:  # the looks disagree (a coverage miss, probability <= alpha): last look
        low, high = _look(np.sort(x), alpha, a)
    median = float(np.median(x)) if n else math.nan
    return Reading(n, median, None, low, high, min(1.0, math.exp(-best)))
