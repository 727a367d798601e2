"""The words of `orchestrator scaling` follow the interval by the leaderboard's rule
(results_db/analysis/verdict.py interval_verdict): "flat within noise" / "within noise at equal
compute" only when the CI lies inside the stated margin (+-100 x min_effect), "inconclusive"
when it merely contains 0; a slope whose CI excludes 0 says in whose favour the change shifts,
and "lead / deficit grows / shrinks" only where the first point's CI says which side the
variant started on. Hand-built frames into results_db.analysis.scaling.scaling, one variant per
case of the make-run DB of 2026-12-03 (slope CI [-3.2, +78.1] pp per decade was called "flat
within noise", [-14.7, +30.8] % "within noise at equal compute", a deficit growing from +8 % to
+15 % "moves toward the baseline")."""

from __future__ import annotations

import math
from collections.abc import Callable

import polars as pl
import pytest

from results_db.analysis.scaling import scaling
from results_db.analysis.stats import t_quantile

STEPS = (100, 1_000, 10_000)  # tokens per step 1: one decade between evaluation points
SEEDS = (0, 1, 2)
T2 = t_quantile(0.975, 2)
Pct = Callable[[int, float], float]  # (seed, decades since the first point) -> Δ % vs baseline


def _slope(mean: float, half: float) -> Pct:
    """Per-seed slopes whose t-interval over the three seeds is mean +- half pp/decade."""
    sd = half * math.sqrt(3) / T2
    return lambda s, dec: (mean + (s - 1) * sd) * dec


CASES: dict[str, Pct] = {
    "wide_slope": _slope(37.45, 40.65),  # CI [-3.2, +78.1]: was "flat within noise"
    # the change at the last point: 8.05 +- 22.75 % (CI [-14.7, +30.8]), no slope by seed
    "wide_iso": lambda s, dec: (8.05 + (s - 1) * 22.75 * math.sqrt(3) / T2) * dec / 2,
    "deficit_grows": lambda s, dec: 8.0 + (s - 1) + (3.5 + (s - 1) * 0.2) * dec,  # +8 -> +15
    "lead_shrinks": lambda s, dec: -4.5 + (s - 1) * 0.5 + (2.2 + (s - 1) * 0.1) * dec,
    "flat": lambda s, dec: -(s - 1) * 0.1 + (0.1 + (s - 1) * 0.2) * dec,  # slope CI +-0.5
}


def _frames(cases: dict[str, Pct]) -> tuple[pl.DataFrame, ...]:
    """(series, runs, info, costs): the baseline at 10 everywhere, each case's variant at
    10 x (1 + pct / 100), three seeds, equal FLOPs per token (so equal compute = equal
    tokens)."""
    series, runs, info = [], [], []
    run_id = 0
    for variant, pct in {"baseline": lambda s, dec: 0.0, **cases}.items():
        info.append({"group_key": variant, "variant": variant, "lr": 1e-2})
        for seed in SEEDS:
            run_id += 1
            runs.append({"run_id": run_id, "group_key": variant, "seed": seed,
                         "status": "succeeded"})
            for step in STEPS:
                dec = math.log10(step) - 2
                series.append({"run_id": run_id, "step": step,
                               "value": 10.0 * (1 + pct(seed, dec) / 100)})
    costs = pl.DataFrame({"group_key": [r["group_key"] for r in info],
                          "tokens_per_step": [1] * len(info), "params": [1000] * len(info),
                          "fpt": [6000.0] * len(info)})
    return pl.DataFrame(series), pl.DataFrame(runs), pl.DataFrame(info), costs


@pytest.fixture(scope="module")
def trends() -> dict[tuple[str, str], dict]:
    series, runs, info, costs = _frames(CASES)
    sc = scaling(series, runs, info, costs, "baseline", "val/ppl", higher=False,
                 states=["succeeded"])
    return {(r["variant"], r["x"]): r for r in sc.trends.iter_rows(named=True)}


def test_a_wide_slope_ci_is_inconclusive_not_flat(trends: dict) -> None:
    r = trends["wide_slope", "tokens"]
    assert (r["slope_ci_low"], r["slope_ci_high"]) == (pytest.approx(-3.2, abs=1e-9),
                                                      pytest.approx(78.1, abs=1e-9))
    assert r["verdict"] == "inconclusive"
    assert r["sentence"].endswith("slope +37.45 pp per decade [-3.20, +78.10] over 3 seeds: "
                                  "inconclusive (the CI contains 0 but reaches beyond +-1 pp "
                                  "per decade).")


def test_a_wide_ci_at_equal_compute_is_inconclusive_not_within_noise(trends: dict) -> None:
    r = trends["wide_iso", "iso_flops"]
    assert (r["ci_low_pct"], r["ci_high_pct"]) == (pytest.approx(-14.7, abs=1e-9),
                                                  pytest.approx(30.8, abs=1e-9))
    assert r["verdict"] == "inconclusive at equal compute"
    assert "[-14.70, +30.80]" in r["sentence"]
    assert r["sentence"].endswith(": inconclusive at equal compute (the CI contains 0 but "
                                  "reaches beyond +-1 %).")


def test_a_growing_deficit_shifts_in_the_baselines_favour(trends: dict) -> None:
    r = trends["deficit_grows", "tokens"]
    assert (r["delta_pct_from"], r["delta_pct_to"]) == (pytest.approx(8.0), pytest.approx(15.0))
    assert r["slope_ci_low"] > 0  # the interval says the change grows
    assert r["verdict"] == "shifts in the baseline's favour"
    assert "moves toward the baseline" not in r["sentence"]
    assert ": shifts in the baseline's favour, its deficit grows." in r["sentence"]
    assert trends["deficit_grows", "iso_flops"]["verdict"] == "worse at equal compute"


def test_a_closing_lead_says_so(trends: dict) -> None:
    r = trends["lead_shrinks", "tokens"]
    assert r["delta_pct_from"] == pytest.approx(-4.5) and r["slope_ci_low"] > 0
    assert r["verdict"] == "shifts in the baseline's favour"
    assert ": shifts in the baseline's favour, its lead shrinks." in r["sentence"]


def test_flat_and_within_noise_only_inside_the_margin(trends: dict) -> None:
    r = trends["flat", "tokens"]
    assert -1 <= r["slope_ci_low"] < 0 < r["slope_ci_high"] <= 1
    assert r["verdict"] == "flat within noise"
    assert r["sentence"].endswith(": flat within noise (the CI lies inside +-1 pp per decade).")
    iso = trends["flat", "iso_flops"]
    assert -1 <= iso["ci_low_pct"] < 0 < iso["ci_high_pct"] <= 1
    assert iso["verdict"] == "within noise at equal compute"


def test_the_margin_is_min_effect() -> None:
    """The same slope CI (+-0.5 pp) is inconclusive when the smallest change that matters is
    0.3 % (margin +-0.3 pp per decade), flat at the default 1 %."""
    series, runs, info, costs = _frames({"flat": CASES["flat"]})
    sc = scaling(series, runs, info, costs, "baseline", "val/ppl", higher=False,
                 states=["succeeded"], min_effect=0.003)
    by = {r["x"]: r for r in sc.trends.iter_rows(named=True)}
    assert by["tokens"]["verdict"] == "inconclusive"
    assert "beyond +-0.3 pp per decade" in by["tokens"]["sentence"]
    with pytest.raises(ValueError, match="min_effect"):
        scaling(series, runs, info, costs, "baseline", "val/ppl", higher=False,
                states=["succeeded"], min_effect=0.0)
