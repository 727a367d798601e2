"""The sign test's confidence sequence (results_db/analysis/signcs.py) against its definition
and a simulation: the order statistics it returns are exactly the medians the martingale keeps,
its anytime p-value is 1 / max M_n, and on skewed differences (where the mixture t's Gaussian
assumption fails) it covers the true median at every look with at least its level."""

from __future__ import annotations

import math

import numpy as np
import pytest

from results_db.analysis import signcs


@pytest.mark.parametrize("n, alpha", [(5, 0.05), (12, 0.05), (30, 0.01), (40, 0.2)])
def test_the_interval_is_every_median_the_martingale_keeps(n: int, alpha: float) -> None:
    d = np.sort(np.random.default_rng(n).standard_normal(n))
    low, high = signcs._look(d, alpha, signcs.A)
    # candidate medians: just inside and outside every order statistic
    for m in np.concatenate([d - 1e-9, d + 1e-9]):
        kept = float(signcs.log_martingale(int((d > m).sum()), n)) < -math.log(alpha)
        assert kept == (low <= m <= high), (m, low, high)


def test_the_p_value_is_one_over_the_largest_martingale() -> None:
    # n positive signs: M_n(0) = 2^n B(n + 1, 1) = 2^n / (n + 1)
    for n in (1, 4, 9):
        assert signcs.read(np.ones(n), 0.05).p_value == pytest.approx(min(1.0, (n + 1) / 2**n))


def test_a_one_sided_divergence_is_a_sign_without_a_size() -> None:
    d = np.array([-1.0, -2.0, -0.5, -1.5, -math.inf, -0.8, -1.1, -0.9, -1.3, -0.7, -1.2, -0.6])
    r = signcs.read(d, 0.05)
    assert -math.inf < r.low <= r.high < 0  # decided 'lower', with a size read off the others
    assert r.mean == pytest.approx(float(np.median(d)))


def test_it_covers_a_skewed_median_at_every_look() -> None:
    """Centred exponential differences (skewness 2): the true median is ln 2 - 1. Over 600
    sequences of 40 looks, read at every look and intersected, the interval misses it at most
    as often as alpha allows (plus three binomial standard errors), and it narrows."""
    alpha, reps, n = 0.1, 600, 40
    rng = np.random.default_rng(7)
    median = math.log(2.0) - 1.0
    misses, widths = 0, []
    for _ in range(reps):
        # the reading is the intersection over every look: it holds the median iff every
        # look did (a look after each seed, as the allocation reads it)
        r = signcs.read(rng.exponential(1.0, n) - 1.0, alpha)
        misses += not (r.low <= median <= r.high)
        widths.append(r.high - r.low)
    assert misses / reps <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps), misses
    assert np.median(widths) < 1.5  # 40 signs bound the median to about a standard deviation
