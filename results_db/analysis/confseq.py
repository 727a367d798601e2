"""Anytime-valid inference for a paired per-seed difference: a confidence sequence that stays
valid however often it is looked at and whenever seeds stop being added.

A fixed-n t interval checked after every new seed is not a 95 % interval any more: peeking at
n = 2..20 calls "better/worse" about a quarter of the time when nothing differs
(benchmarks/decide_sim.py measures it). This module replaces it, for sweeps that add seeds until
they decide, with the mixture t confidence sequence of Lai (1976) (Wang & Ramdas 2023,
"Anytime-valid t-tests and confidence sequences for Gaussian means with unknown variance";
Lindon et al. 2022):

Per-seed differences d_1..d_n ~ N(mu, sigma^2), sigma unknown. For a candidate mean m, with the
one-sample t statistic t = (mean(d) - m) / (s / sqrt(n)) and nu = n - 1, the Bayes factor of a
normal mixture over the standardised effect (mu - m) / sigma ~ N(0, g) against mu = m, with
the right-Haar prior on sigma,

    BF_n(m) = (1 + n g)^(-1/2) * [(1 + t^2 / nu) / (1 + t^2 / (nu (1 + n g)))]^((nu + 1) / 2),

is an e-process under mu = m (it is a test martingale in the filtration of the scale-invariant
statistics), so by Ville's inequality P(sup_n BF_n(mu) >= 1 / alpha) <= alpha. The confidence
sequence is {m : BF_n(m) < 1 / alpha}, which is |t| < t*_n with the closed form

    K = (sqrt(1 + n g) / alpha)^(2 / (nu + 1)),
    t*_n^2 = nu (K - 1) / (1 - K / (1 + n g))        (no bound, the whole line, if K >= 1 + n g)

so at look n the interval is mean(d) -+ t*_n s / sqrt(n). Intersected over looks (running max
of the lower ends, running min of the upper ends), it is still valid and never widens, so a
verdict read off it never flips back. The anytime p-value of "no difference" is
min(1, 1 / max_k BF_k(0)); Holm over a sweep's rows is valid on these p-values as on any.

``g`` is the prior variance of the standardised effect: 1 puts the mixture's weight on effects
of about one seed-sigma, the size a seed-limited ablation can hope to resolve. tests/results_db/
test_confseq.py checks the closed form against scipy's root finding of BF_n(m) = 1 / alpha.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIXTURE_G = 1.0  # prior variance of the standardised effect (module docstring)
MIN_LOOK = 2  # a t statistic needs a variance: no interval before two paired seeds


def mixture_bf(t: float, n: int, g: float = MIXTURE_G) -> float:
    """BF_n for a t statistic ``t`` after ``n`` observations (module docstring)."""
    nu = n - 1
    a = 1.0 + t * t / nu
    b = 1.0 + t * t / (nu * (1.0 + n * g))
    return float(math.exp(-0.5 * math.log1p(n * g) + 0.5 * (nu + 1) * (math.log(a)
                                                                      - math.log(b))))


def t_radius(n: int, alpha: float, g: float = MIXTURE_G) -> float:
    """t*_n: the |t| at which BF_n reaches 1 / alpha; inf when no t reaches it at this n."""
    if n < MIN_LOOK:
        return math.inf
    nu = n - 1
    grow = 1.0 + n * g
    log_k = (2.0 / (nu + 1)) * (0.5 * math.log(grow) - math.log(alpha))
    if log_k >= math.log(grow):
        return math.inf
    k = math.exp(log_k)
    return math.sqrt(nu * math.expm1(log_k) / (1.0 - k / grow))


def radii(ns: np.ndarray, alpha: float, g: float = MIXTURE_G) -> np.ndarray:
    """t_radius for every entry of ``ns`` (any shape; one computation per distinct n)."""
    flat = np.asarray(ns, dtype=int).ravel()
    table = {int(n): t_radius(int(n), alpha, g) for n in np.unique(flat)}
    return np.array([table[int(n)] for n in flat], dtype=float).reshape(np.shape(ns))


def look(mean: np.ndarray, sd: np.ndarray, n: np.ndarray, alpha: float,
         g: float = MIXTURE_G) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) of the confidence sequence at one look, for arrays of rows: mean -+ t*_n sd /
    sqrt(n). Unbounded (-inf, inf) where t*_n is, or where sd is 0 or missing."""
    mean, sd, n = np.asarray(mean, float), np.asarray(sd, float), np.asarray(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = radii(n, alpha, g) * sd / np.sqrt(n)
    half = np.where(np.isfinite(half) & (sd > 0), half, np.inf)
    return mean - half, mean + half


@dataclass(frozen=True)
class Reading:
    """A row's confidence sequence after its n-th paired seed, intersected over looks."""

    n: int
    mean: float
    sd: float | None  # sample std of the differences (ddof 1); None below two seeds
    low: float  # -inf / inf while no look has bounded it
    high: float
    p_value: float  # anytime-valid p of "no difference", min over looks of 1 / BF


def read(d: Sequence[float] | np.ndarray, alpha: float, g: float = MIXTURE_G) -> Reading:
    """The confidence sequence of the mean of ``d`` (in seed order), at level 1 - alpha, after
    every prefix of at least MIN_LOOK values, intersected; the last reading."""
    x = np.asarray(d, dtype=float)
    n = len(x)
    low, high, best_bf = -math.inf, math.inf, 1.0
    for k in range(MIN_LOOK, n + 1):
        head = x[:k]
        mean, sd = float(head.mean()), float(head.std(ddof=1))
        if sd == 0.0:  # identical differences: no scale to judge them by; keep what we had
            continue
        lo, hi = look(np.array(mean), np.array(sd), np.array(k), alpha, g)
        low, high = max(low, float(lo)), min(high, float(hi))
        best_bf = max(best_bf, mixture_bf(mean / (sd / math.sqrt(k)), k, g))
    mean = float(x.mean()) if n else math.nan
    spread = float(x.std(ddof=1)) if n >= MIN_LOOK else None
    if low > high:  # the looks disagree (a coverage miss, probability <= alpha): last look
        lo, hi = look(np.array(mean), np.array(spread or 0.0), np.array(n), alpha, g)
        low, high = float(lo), float(hi)
    return Reading(n, mean, spread, low, high, min(1.0, 1.0 / best_bf))


def seeds_to_width(sd: float, half_width: float, alpha: float, start: int, cap: int,
                   g: float = MIXTURE_G) -> int | None:
    """The smallest n in [start, cap] whose interval half-width t*_n sd / sqrt(n) is below
    ``half_width``, if the spread stays ``sd``; None when even ``cap`` seeds would not do."""
    if half_width <= 0 or not math.isfinite(sd):
        return None
    for n in range(max(start, MIN_LOOK), cap + 1):
        if t_radius(n, alpha, g) * sd / math.sqrt(n) < half_width:
            return n
    return None


# What an adaptive row's interval says (results_db.schema.vocab owns the words of fixed-seed rows).
BETTER, WORSE, WITHIN, UNDECIDED, INCONCLUSIVE = (
    "better", "worse", "within noise", "undecided", "inconclusive")


def verdicts(low: np.ndarray, high: np.ndarray, margin: np.ndarray | float,
             higher_is_better: bool, at_cap: np.ndarray | bool) -> np.ndarray:
    """The verdict of every row from its (intersected) interval of variant - baseline:
    better / worse when it excludes 0 (direction by the metric), within noise when it lies
    inside [-margin, margin], else undecided, or inconclusive once the row has its largest
    seed count (never relabelled within noise: the data did not rule the margin out)."""
    low, high = np.asarray(low, float), np.asarray(high, float)
    above, below = low > 0, high < 0
    up, down = (above, below) if higher_is_better else (below, above)
    inside = (low >= -np.asarray(margin)) & (high <= np.asarray(margin))
    open_ = np.where(np.asarray(at_cap, bool), INCONCLUSIVE, UNDECIDED)
    return np.where(up, BETTER, np.where(down, WORSE, np.where(inside, WITHIN, open_)))
