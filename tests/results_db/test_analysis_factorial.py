"""The 2x2 factorial (results_db/analysis/factorial.py) on a synthetic sweep with a known
interaction (tests/support/factorial_db.py): the cells are the leaderboard's rows, the main
effects and the interaction are hand-computed per paired seed with Bonferroni t intervals over
the 3 contrasts, the unpaired seed is dropped and counted, and a missing cell says so."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

import results_db
from results_db.analysis.factorial import DESIGNS, SPARSE_X_GATED, Design, Factor
from tests.support import factorial_db as f2
from tests.support import synthdb

LEVEL = 1 - 0.05 / 3  # Bonferroni over the 3 contrasts


@pytest.fixture
def db(sqlite_url: str):
    # the arithmetic of a read, not its SQL: one dialect (the reads' SQL is tested on both
    # by the leaderboard's and the decide rows' own tests)
    with results_db.open(sqlite_url) as d:
        yield d


def _by_hand(diffs: list[float], base_mean: float) -> tuple[float, float, float]:
    """(estimate %, low %, high %): the mean over seeds with its Student-t interval."""
    n = len(diffs)
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    half = stats.t.ppf(0.5 + LEVEL / 2, n - 1) * sd / math.sqrt(n)
    return tuple(100 * x / abs(base_mean) for x in (mean, mean - half, mean + half))


def test_cells_main_effects_and_interaction(db) -> None:
    f2.build(db)
    fac = db.factorial(f2.SWEEP)
    assert fac.found and fac.design == SPARSE_X_GATED and fac.baseline == "baseline"
    # cells: the leaderboard's rows as they are (every seed of each cell)
    board = {r["variant"]: r for r in db.leaderboard(f2.SWEEP).iter_rows(named=True)}
    cells = {(r["a"], r["b"]): r for r in fac.cells.iter_rows(named=True)}
    want = {("off", "off"): "baseline", ("on", "off"): "nsa_equal", ("off", "on"): "dense_g1",
            ("on", "on"): "nsa_equal_g1"}
    assert {k: r["variant"] for k, r in cells.items()} == want
    for cell, variant in want.items():
        for col in ("n", "delta_pct", "ci_low_pct", "ci_high_pct", "ci_method", "verdict"):
            assert cells[cell][col] == board[variant][col], (variant, col)
    assert cells[("on", "off")]["verdict"] == "worse"  # sparse alone: +2.1 %
    assert cells[("on", "off")]["ci_method"] == "paired"  # seeds 0-4 on both sides
    assert cells[("off", "on")]["ci_method"] == "welch"  # seeds 0-3 vs the baseline's 0-4
    # contrasts over seeds 0-3 (seed 4 is not in every cell), % of the mean y00 over them
    y = {v: [f2.ppl(v, s) for s in f2.PAIRED] for v in want.values()}
    y00, y10, y01, y11 = (y[want[c]] for c in (("off", "off"), ("on", "off"),
                                               ("off", "on"), ("on", "on")))
    base = statistics.fmean(y00)
    hand = {
        "sparse": [(d - c + e - b) / 2 for c, d, b, e in zip(y00, y10, y01, y11)],
        "gated": [(b - c + e - d) / 2 for c, d, b, e in zip(y00, y10, y01, y11)],
        "sparse x gated": [e - d - b + c for c, d, b, e in zip(y00, y10, y01, y11)]}
    rows = {r["contrast"]: r for r in fac.effects.iter_rows(named=True)}
    assert list(rows) == list(hand)
    for name, diffs in hand.items():
        r = rows[name]
        assert (r["estimate_pct"], r["ci_low_pct"], r["ci_high_pct"]) == \
            pytest.approx(_by_hand(diffs, base), abs=1e-9)
        assert (r["n_seeds"], r["seeds_dropped"], r["df"]) == (4, 1, 3.0)
        assert r["ci_level"] == pytest.approx(LEVEL)
    # the module's numbers, pinned: +0.1 % within +-1 %; -4 % and -4 % with CIs below 0
    assert rows["sparse"]["estimate_pct"] == pytest.approx(0.1)
    assert rows["gated"]["estimate_pct"] == pytest.approx(-4.0)
    assert rows["sparse x gated"]["estimate_pct"] == pytest.approx(-4.0)
    # t(1 - 0.05 / 6, 3) = 4.8567: sparse [-0.098, +0.298] lies inside +-1 %
    assert rows["sparse"]["ci_low_pct"] == pytest.approx(-0.0983, abs=1e-4)
    assert rows["sparse x gated"]["ci_high_pct"] == pytest.approx(-3.6035, abs=1e-4)
    assert [r["verdict"] for r in rows.values()] == ["within noise", "better", "better"]
    assert [r["kind"] for r in rows.values()] == ["main effect", "main effect", "interaction"]
    text = fac.sentence()
    assert text.startswith("Sweep nsa-2x2, 2x2 sparse (nsa = equal) x gated (gate_position = "
                           "G1) on val/ppl vs baseline 'baseline', 4 seeds in every cell (1 "
                           "dropped: no value in some cell): sparse within noise +0.10 % [")
    assert "; gated better -4.00 % [-5.19, -2.81]; sparse x gated interaction better -4.00 % " \
           "[-4.40, -3.60] (the two together do better than their separate effects add up to) " \
           "[Bonferroni over the 3 contrasts: each CI at 98.33 %, family-wise error <= 5 %]." \
           in text


def test_branch_gate_variants_are_no_cells_and_a_missing_cell_says_so(db) -> None:
    # nsa_gated is NSA with its own gate, not "sparse on": without nsa_equal_g1 there is no 2x2
    f2.build(db, ("baseline", "dense_g1", "nsa_equal", "nsa_gated"), sweep="no-corner")
    fac = db.factorial("no-corner")
    assert not fac.found and fac.cells.is_empty() and fac.effects.is_empty()
    assert fac.sentence() == (
        "Sweep no-corner has no 2x2 of sparse (nsa = equal) x gated (gate_position = G1): no "
        "variant is sparse on, gated on beside baseline 'baseline'.")


def _register(db, spec: dict, value=lambda variant, seed: 10.0) -> None:
    for reg in synthdb.register(db, spec):
        synthdb.play(db, reg.id, summaries={"val/ppl": value(reg.run.variant, reg.run.seed)})


def test_a_cell_with_two_candidates_is_ambiguous(db) -> None:
    spec = f2.spec(sweep="amb")
    spec["variants"]["dense_g1_head"] = {"gate.position": "G1", "gate.granularity": "headwise"}
    spec["exclude"].append({"variant": "dense_g1_head", "seed": [4]})
    _register(db, spec)
    assert db.factorial("amb").reason == (
        "2 variants are sparse off, gated on beside baseline 'baseline' (dense_g1, "
        "dense_g1_head)")


def test_the_design_is_data_and_the_first_one_found_is_used(db) -> None:
    f2.build(db)
    # NSA's own gate as "sparse on": the sweep has no nsa_gated + G1 row
    own = Design(Factor("sparse", "nsa", "gated", ("nsa",)), SPARSE_X_GATED.b)
    fac = db.factorial(f2.SWEEP, designs=(own,))
    assert fac.reason == "no variant is sparse on, gated on beside baseline 'baseline'"
    assert fac.sentence().startswith("Sweep nsa-2x2 has no 2x2 of sparse (nsa = gated) x ")
    fac = db.factorial(f2.SWEEP, designs=(own, SPARSE_X_GATED))
    assert fac.found and fac.design is SPARSE_X_GATED and DESIGNS == (SPARSE_X_GATED,)


def test_only_unpaired_seeds_give_no_interval(db) -> None:
    # each gated cell runs a seed no other cell runs: no seed is in all four
    spec = f2.spec(sweep="apart")
    spec["exclude"] = [{"variant": "dense_g1", "seed": [0, 1, 2, 3]},
                       {"variant": "nsa_equal_g1", "seed": [0, 1, 2, 4]},
                       {"variant": "nsa_gated", "seed": [1, 2, 3, 4]}]
    _register(db, spec, lambda variant, seed: 10.0 + 0.1 * seed)
    fac = db.factorial("apart")
    assert fac.found
    assert fac.effects["n_seeds"].to_list() == [0, 0, 0]
    assert fac.effects["seeds_dropped"].to_list() == [5, 5, 5]
    assert fac.effects["verdict"].to_list() == ["no data"] * 3
    assert "0 seeds in every cell (5 dropped: no value in some cell): sparse no data; gated " \
           "no data; sparse x gated interaction no data [" in fac.sentence()
