"""The anytime-valid confidence sequence (results_db/analysis/confseq.py) against an independent
computation: scipy's root finding of the mixture Bayes factor, BF_n(m) = 1 / alpha, in the
candidate mean m itself. Its coverage under peeking is a simulation (benchmarks/decide_sim.py),
not a test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

from results_db.analysis import confseq
from results_db.analysis.confseq import (
    INCONCLUSIVE,
    UNDECIDED,
    mixture_bf,
    read,
    seeds_to_width,
    t_radius,
    verdicts,
)


def _bf_at(m: float, d: np.ndarray, g: float) -> float:
    """BF_n(m) written from its definition: the t statistic of d against m."""
    n = len(d)
    t = (d.mean() - m) / (d.std(ddof=1) / math.sqrt(n))
    return (1 + n * g) ** -0.5 * ((1 + t * t / (n - 1))
                                  / (1 + t * t / ((n - 1) * (1 + n * g)))) ** (n / 2)


def _interval_by_roots(d: np.ndarray, alpha: float, g: float) -> tuple[float, float]:
    """{m : BF_n(m) < 1/alpha} by brentq on each side of the mean."""
    mean, span = d.mean(), 1e3 * (abs(d).max() + 1)
    f = lambda m: _bf_at(m, d, g) - 1 / alpha  # noqa: E731
    return brentq(f, mean - span, mean), brentq(f, mean, mean + span)


@pytest.mark.parametrize("n", [5, 6, 10, 30, 200])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 15])
@pytest.mark.parametrize("g", [0.25, 1.0, 4.0])
def test_closed_form_radius_is_the_root_of_the_bayes_factor(n: int, alpha: float, g: float
                                                            ) -> None:
    r = t_radius(n, alpha, g)
    if math.isinf(r):  # then no t reaches 1/alpha: BF's supremum (1 + n g)^((n-1)/2) is below
        assert (1 + n * g) ** ((n - 1) / 2) <= 1 / alpha
        return
    assert mixture_bf(r, n, g) == pytest.approx(1 / alpha, rel=1e-9)
    assert r == pytest.approx(brentq(lambda t: mixture_bf(t, n, g) - 1 / alpha, 0, 1e9),
                              rel=1e-9)


def test_one_look_matches_the_roots_in_the_mean() -> None:
    rng = np.random.default_rng(3)
    for n in (6, 9, 25):
        d = rng.normal(0.4, 1.3, n)
        low, high = confseq.look(np.array(d.mean()), np.array(d.std(ddof=1)), np.array(n),
                                 0.05)
        lo_ref, hi_ref = _interval_by_roots(d, 0.05, confseq.MIXTURE_G)
        assert float(low) == pytest.approx(lo_ref, rel=1e-7)
        assert float(high) == pytest.approx(hi_ref, rel=1e-7)


def test_reading_is_the_intersection_over_looks_and_never_widens() -> None:
    rng = np.random.default_rng(7)
    d = rng.normal(0.0, 1.0, 40)
    widths, prev = [], (-math.inf, math.inf)
    for k in range(2, 41):
        r = read(d[:k], 0.05)
        assert r.low >= prev[0] and r.high <= prev[1]  # the running intersection
        refs = [_interval_by_roots(d[:j], 0.05, confseq.MIXTURE_G) for j in range(5, k + 1)]
        if refs:
            assert r.low == pytest.approx(max(lo for lo, _ in refs), rel=1e-7)
            assert r.high == pytest.approx(min(hi for _, hi in refs), rel=1e-7)
        prev = (r.low, r.high)
        widths.append(r.high - r.low)
    assert math.isinf(widths[0]) and math.isfinite(widths[-1])


def test_few_seeds_cannot_decide_at_all() -> None:
    """Honest about small n: at alpha 5 % and g 1 no interval is bounded before 5 seeds, so a
    3-seed row is never called better or worse, however clear its 3 values look."""
    assert all(math.isinf(t_radius(n, 0.05)) for n in (2, 3, 4))
    r = read([-5.0, -5.1, -4.9], 0.05)
    assert (r.low, r.high) == (-math.inf, math.inf)
    assert r.p_value >= 1 / (1 + 3 * confseq.MIXTURE_G) > 0.05  # BF_3 <= (1 + 3g)^1


def test_anytime_p_value_is_one_over_the_largest_bayes_factor() -> None:
    d = np.array([-1.2, -0.8, -1.5, -1.1, -0.9, -1.3, -1.0])
    best = max(_bf_at(0.0, d[:k], confseq.MIXTURE_G) for k in range(2, len(d) + 1))
    assert read(d, 0.05).p_value == pytest.approx(min(1.0, 1 / best), rel=1e-9)


def test_verdicts_follow_the_interval() -> None:
    low = np.array([-3.0, 0.5, -0.2, -0.2, -2.0, -2.0])
    high = np.array([-1.0, 2.0, 0.3, 0.3, 1.0, 1.0])
    at_cap = np.array([False, False, False, True, False, True])
    got = verdicts(low, high, 0.5, higher_is_better=False, at_cap=at_cap)
    assert list(got) == ["better", "worse", "within noise", "within noise", UNDECIDED,
                         INCONCLUSIVE]
    # for a score (higher is better) the same interval below 0 is worse
    assert verdicts(np.array([-3.0]), np.array([-1.0]), 0.5, True, False)[0] == "worse"


def test_seeds_to_width_is_the_first_n_narrow_enough() -> None:
    n = seeds_to_width(1.0, 0.8, 0.05, start=3, cap=100)
    assert n is not None and t_radius(n, 0.05) / math.sqrt(n) < 0.8
    assert t_radius(n - 1, 0.05) / math.sqrt(n - 1) >= 0.8
    assert seeds_to_width(1.0, 0.01, 0.05, start=3, cap=100) is None
