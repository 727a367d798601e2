"""What pairing the seeds bought (results_db/analysis/pairing.py): the correlation of baseline
and variant over their paired seeds and the measured seed multiplier, on known numbers, the
same from the scalar definition, the polars aggregation, the leaderboard and decide rows."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from results_db.analysis import pairing
from results_db.analysis.compare import compare
from results_db.analysis.decide_rule import DecideRule
from results_db.analysis.sequential import read_rows

BASE = [10.0, 12.0, 11.0, 13.0, 9.0]
# the variant tracks its baseline seed by seed, a little lower, with its own wobble
VARIANT = [9.5, 11.0, 10.8, 12.1, 8.9]


def test_known_numbers() -> None:
    """By hand: var(b) = 10 / 4 = 2.5, var(x) = 6.452 / 4 = 1.613, var(x - b) = 0.652 / 4 =
    0.163, so rho = (1.613 + 2.5 - 0.163) / (2 sqrt(1.613 * 2.5)) = 0.98351 and the multiplier
    (1.613 + 2.5) / 0.163 = 25.23: a paired seed is worth ~25 unpaired ones here."""
    got = pairing.pairing(VARIANT, BASE)
    assert got.corr == pytest.approx(np.corrcoef(VARIANT, BASE)[0, 1], rel=1e-12)
    assert got.corr == pytest.approx(0.983513, abs=1e-6)
    vx, vb = np.var(VARIANT, ddof=1), np.var(BASE, ddof=1)
    vd = np.var(np.subtract(VARIANT, BASE), ddof=1)
    assert (vx, vb, vd) == pytest.approx((1.613, 2.5, 0.163))
    assert got.multiplier == pytest.approx((vx + vb) / vd, rel=1e-12)
    assert got.multiplier == pytest.approx(25.2331, abs=1e-4)


def test_equal_spreads_give_one_over_one_minus_rho() -> None:
    b = [1.0, 2.0, 3.0, 4.0]
    x = [2.0, 1.0, 4.0, 3.0]  # the same values, so the same spread: rho 0.6
    got = pairing.pairing(x, b)
    assert got.corr == pytest.approx(0.6)
    assert got.multiplier == pytest.approx(1 / (1 - 0.6), rel=1e-12)


def test_unpaired_noise_buys_nothing_and_anticorrelation_costs() -> None:
    b = [1.0, 2.0, 3.0, 4.0]
    anti = pairing.pairing([4.0, 3.0, 2.0, 1.0], b)
    assert anti.corr == pytest.approx(-1.0) and anti.multiplier == pytest.approx(0.5)
    assert pairing.pairing([1.0, 2.0], [2.0, 1.0]) == pairing.Pairing(None, None)  # < 3 seeds
    assert pairing.pairing([1.0, 1.0, 1.0], b[:3]).corr is None  # no spread to correlate


def test_the_aggregation_is_the_definition() -> None:
    frame = pl.DataFrame({"x": VARIANT, "b": BASE})
    got = frame.select(*pairing.aggs("x", "b")).row(0)
    want = pairing.pairing(VARIANT, BASE)
    assert got == pytest.approx((want.corr, want.multiplier), rel=1e-12)


def _sweep() -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = [(i, "b", s, v) for i, (s, v) in enumerate(enumerate(BASE))]
    rows += [(10 + i, "g", s, v) for i, (s, v) in enumerate(enumerate(VARIANT))]
    runs = pl.DataFrame(rows, schema={"run_id": pl.Int64, "group_key": pl.String,
                                      "seed": pl.Int64, "val/ppl": pl.Float64}, orient="row")
    runs = runs.with_columns(status=pl.lit("succeeded"))
    info = pl.DataFrame({"group_key": ["b", "g"], "variant": ["baseline", "g1"],
                         "lr": [1e-2, 1e-2]})
    return runs, info


def test_the_leaderboard_and_the_decide_rows_show_it() -> None:
    runs, info = _sweep()
    board = compare(runs, info, "val/ppl", "baseline")
    g1 = board.filter(pl.col("variant") == "g1").row(0, named=True)
    want = pairing.pairing(VARIANT, BASE)
    assert g1["ci_method"] == "paired"
    assert (g1["pair_corr"], g1["seed_multiplier"]) == pytest.approx(
        (want.corr, want.multiplier), rel=1e-12)
    assert board.filter(pl.col("variant") == "baseline")["pair_corr"][0] is None
    rule = DecideRule(metric="val/ppl", margin=0.02, relative=True, error_rate=0.05,
                      max_seeds=30, higher_is_better=False)
    values = runs.select("run_id", "group_key", "seed", "status", value=pl.col("val/ppl"))
    row = read_rows(values, info, "baseline", rule).row(0, named=True)
    assert (row["pair_corr"], row["seed_multiplier"]) == pytest.approx(
        (want.corr, want.multiplier), rel=1e-12)
    assert math.isfinite(row["seed_multiplier"])
