"""results_db/analysis/stats.py against hand-computed values (the computation is written out
in each test) and, where scipy happens to be installed, against scipy as a second oracle."""

from __future__ import annotations

import math

import pytest

from results_db.analysis.stats import (
    delta_ci,
    describe,
    seeds_needed,
    t_quantile,
)


def test_t_quantile_closed_forms_and_table_values() -> None:
    # df = 1 is the Cauchy distribution: t = tan(pi (p - 1/2)); tan(0.475 pi) = 12.7062
    assert t_quantile(0.975, 1) == pytest.approx(12.706204736, rel=1e-9)
    # df = 2: t = (2p - 1) / sqrt(2 p (1 - p)) = 0.95 / sqrt(0.04875) = 4.302653
    assert t_quantile(0.975, 2) == pytest.approx(0.95 / math.sqrt(0.04875), rel=1e-12)
    # printed t tables (3 decimals): t(0.975, 5) = 2.571, t(0.975, 30) = 2.042,
    # t(0.8, 30) = 0.854, t(0.995, 10) = 3.169, t(0.975, 120) = 1.980
    for p, df, table in ((0.975, 5, 2.571), (0.975, 30, 2.042), (0.8, 30, 0.854),
                         (0.995, 10, 3.169), (0.975, 120, 1.980)):
        assert t_quantile(p, df) == pytest.approx(table, abs=6e-4)
    assert t_quantile(0.025, 5) == pytest.approx(-t_quantile(0.975, 5))
    assert t_quantile(0.975, 1e6) == pytest.approx(1.959964, abs=1e-5)  # -> normal
    from scipy.special import stdtr

    assert stdtr(7.3, t_quantile(0.9, 7.3)) == pytest.approx(0.9, abs=1e-12)  # non-integer df
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 3)


def test_matches_scipy_when_available() -> None:
    sp = pytest.importorskip("scipy.stats")
    for df in (1, 2, 3, 4.5, 9, 30, 59.5):
        for p in (0.6, 0.8, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(float(sp.t.ppf(p, df)), rel=1e-9)
    for df in (60, 61.5, 120, 1000, 1e5):  # the Cornish-Fisher series
        for p in (0.6, 0.8, 0.975, 0.995):
            assert t_quantile(p, df) == pytest.approx(float(sp.t.ppf(p, df)), rel=1e-8)


def test_describe() -> None:
    d = describe([18.0, 18.5, 19.0])
    # mean 18.5; squared deviations 0.25 + 0 + 0.25 = 0.5; / (n-1) = 0.25; sqrt = 0.5
    assert (d.n, d.mean, d.std) == (3, 18.5, pytest.approx(0.5))
    assert describe([4.0]).std is None and describe([]).mean is None


def test_paired_ci_by_hand() -> None:
    # seeds 0, 1, 2 in both groups -> paired. d = x - b = (-2, -2.5, -3): mean -2.5,
    # sd = 0.5 (as above), se = 0.5 / sqrt(3) = 0.288675; t(0.975, 2) = 4.302653
    # half width = 4.302653 x 0.288675 = 1.242069 -> CI (-3.742069, -1.257931)
    ci = delta_ci([18.0, 18.5, 19.0], [20.0, 21.0, 22.0], [0, 1, 2], [0, 1, 2])
    assert ci.method == "paired" and ci.df == 2
    assert ci.delta == pytest.approx(-2.5)
    assert ci.low == pytest.approx(-2.5 - 4.302653 * 0.5 / math.sqrt(3), abs=1e-6)
    assert ci.high == pytest.approx(-1.257931, abs=1e-6)
    assert ci.spread == pytest.approx(0.5)
    # seeds given in another order pair by seed, not by position
    again = delta_ci([19.0, 18.0, 18.5], [22.0, 20.0, 21.0], [2, 0, 1], [2, 0, 1])
    assert (again.low, again.high) == pytest.approx((ci.low, ci.high))


def test_welch_ci_by_hand() -> None:
    # x = (19.0, 19.4): mean 19.2, s² = 0.08; b = (20, 21, 22): mean 21, s² = 1
    # vx = 0.08/2 = 0.04, vb = 1/3; se = sqrt(0.373333) = 0.611010
    # df = 0.373333² / (0.04²/1 + 0.333333²/2) = 0.139378 / 0.057156 = 2.438559
    ci = delta_ci([19.0, 19.4], [20.0, 21.0, 22.0], [0, 1], [0, 1, 2])
    assert ci.method == "welch"
    assert ci.df == pytest.approx(0.37333333 ** 2 / (0.0016 + 0.11111111 / 2), rel=1e-6)
    half = t_quantile(0.975, ci.df) * math.sqrt(0.04 + 1 / 3)
    assert (ci.low, ci.high) == pytest.approx((-1.8 - half, -1.8 + half))
    assert 3.18 < t_quantile(0.975, ci.df) < 4.30  # between t(.975, 3) and t(.975, 2)


def test_no_ci_with_a_single_seed_and_exact_delta_without_noise() -> None:
    one = delta_ci([18.0], [20.0, 21.0, 22.0], [0], [0, 1, 2])
    assert one.method == "none" and one.low is None and one.delta == pytest.approx(-3.0)
    flat = delta_ci([2.0, 2.0], [3.0, 3.0], [0, 1], [5, 6])  # unpaired, zero variance
    assert (flat.method, flat.low, flat.high) == ("welch", -1.0, -1.0)


def test_seeds_needed_by_hand() -> None:
    # two groups, rel std 1 %, effect 1 %: need (t(.975, 2n-2) + t(.8, 2n-2)) sqrt(2/n) <= 1
    # n = 16: df 30, (2.0423 + 0.8538) * sqrt(2/16) = 2.8961 * 0.35355 = 1.0239 > 1
    # n = 17: df 32, (2.0369 + 0.8530) * sqrt(2/17) = 2.8899 * 0.34300 = 0.9912 <= 1
    assert seeds_needed(0.01, 0.01) == 17
    # paired, rel std of differences 0.5 %, effect 1 %: (t(.975, n-1) + t(.8, n-1)) 0.5/sqrt(n)
    # n = 4: (3.1824 + 0.9785) * 0.5 / 2 = 1.0402 > 1; n = 5: (2.7764 + 0.9410) * 0.5 /
    # 2.2361 = 0.8313 <= 1
    assert seeds_needed(0.005, 0.01, paired=True) == 5
    assert seeds_needed(0.0, 0.01) == 2
    assert seeds_needed(1.0, 0.001) == 1000  # capped
    assert seeds_needed(0.02, 0.01) > seeds_needed(0.01, 0.01)  # more noise, more seeds
    with pytest.raises(ValueError, match="min_effect"):
        seeds_needed(0.01, 0.0)
