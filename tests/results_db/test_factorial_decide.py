"""The 2x2 factorial of an adaptive (``decide:``) sweep (results_db/analysis/factorial.py) keeps
the rule's error rate: its cells are the leaderboard's anytime-valid rows, and each contrast is
the rule's confidence sequence over the hand-computed per-seed contrasts, in the rows' pair
order, at error_rate / 3; a fixed-seed reading is what the same sweep gets without the rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

import results_db
from contract.metrics import VAL_LOSS, VAL_PPL
from results_db.analysis import confseq, signcs
from results_db.analysis.decide_rule import DecideRule
from results_db.analysis.factorial import Factorial
from tests.support import factorial_db as f2
from tests.support import synthdb

RULE = DecideRule(metric=VAL_PPL, margin=0.01, relative=True, error_rate=0.05, max_seeds=20,
                  higher_is_better=False)
ALPHA = RULE.error_rate / 3  # Bonferroni over the 3 contrasts
N = 12  # seeds per cell
CELLS = {("off", "off"): "baseline", ("on", "off"): "nsa_equal", ("off", "on"): "dense_g1",
         ("on", "on"): "nsa_equal_g1"}
rng = np.random.default_rng(3)
BASE = 10 + rng.normal(0, 0.2, N)
# per seed, relative changes: sparse ~ +2.1 %, gated ~ -2 %, both together a further -4 %;
# the first seven seeds' interaction is tight, the last five's noisy: read first, the tight
# ones bound the interval at 7 seeds (the mixture t at 98.3 % needs 6), so the order matters
SPARSE = 0.021 + rng.normal(0, 0.002, N)
GATE = -0.02 + rng.normal(0, 0.003, N)
BOTH = -0.04 + np.concatenate([rng.normal(0, 0.001, 7), rng.normal(0, 0.01, 5)])


def _ppl(variant: str, seed: int) -> float:
    y = BASE[seed]
    if variant in ("nsa_equal", "nsa_equal_g1"):
        y *= 1 + SPARSE[seed]
    if variant in ("dense_g1", "nsa_equal_g1"):
        y *= 1 + GATE[seed]
    if variant == "nsa_equal_g1":
        y *= 1 + BOTH[seed]
    return float(y - 0.1 if variant == "nsa_gated" else y)


@pytest.fixture
def db(sqlite_url: str):
    # the arithmetic of a read, not its SQL: one dialect (the reads' SQL is tested on both
    # by the leaderboard's and the decide rows' own tests)
    with results_db.open(sqlite_url) as d:
        spec = {**f2.spec(sweep="adaptive"), "seeds": list(range(N)), "exclude": []}
        for reg in synthdb.register(d, spec):
            y = _ppl(reg.run.variant, reg.run.seed)
            synthdb.play(d, reg.id, summaries={VAL_PPL: y, VAL_LOSS: math.log(y)})
        yield d


def _contrasts(seeds: list[int]) -> dict[str, np.ndarray]:
    """Per seed (in ``seeds``' order), each contrast relative to that seed's y00."""
    y = {cell: np.array([_ppl(v, s) for s in seeds]) for cell, v in CELLS.items()}
    y00, y10, y01, y11 = (y[c] for c in (("off", "off"), ("on", "off"), ("off", "on"),
                                         ("on", "on")))
    return {"sparse": (y10 - y00 + y11 - y01) / 2 / np.abs(y00),
            "gated": (y01 - y00 + y11 - y10) / 2 / np.abs(y00),
            "sparse x gated": (y11 - y10 - y01 + y00) / np.abs(y00)}


def _check(fac: Factorial, rule: DecideRule, seeds: list[int]) -> None:
    """Each contrast row is the rule's sequence over the hand-computed values, read in
    ``seeds``' order, at ALPHA; its verdict confseq.verdicts' with the rule's margin, an open
    interval inconclusive once no cell gets more seeds (none "needs >= k seeds")."""
    rows = {r["contrast"]: r for r in fac.effects.iter_rows(named=True)}
    closed = not any(v.startswith("needs >= ") for v in fac.cells["verdict"].to_list())
    base_mean = float(np.mean(BASE))
    for name, c in _contrasts(seeds).items():
        ref = (signcs.read(c, ALPHA) if rule.test == "sign"
               else confseq.read(c, ALPHA, rule.g))
        r = rows[name]
        assert math.isfinite(ref.low) and math.isfinite(ref.high), name  # bounded at 12 seeds
        assert (r["ci_low_pct"], r["ci_high_pct"]) == pytest.approx(
            (100 * ref.low, 100 * ref.high), abs=1e-9), name
        # the change shown is the mean contrast in % of |mean y00| (compare.py's rule)
        y = {cell: np.array([_ppl(v, s) for s in seeds]) for cell, v in CELLS.items()}
        assert r["estimate_pct"] == pytest.approx(
            100 * float(np.mean(c * np.abs(y[("off", "off")]))) / base_mean, abs=1e-9)
        want = confseq.verdicts(np.array(ref.low), np.array(ref.high), rule.margin,
                                rule.higher_is_better, at_cap=closed).item()
        assert r["verdict"] == want, name
        assert (r["n_seeds"], r["seeds_dropped"], r["df"]) == (N, 0, None)
        assert r["ci_level"] == pytest.approx(1 - ALPHA) and r["ci_method"] == "anytime-valid"


@pytest.mark.parametrize("test", ["mixture_t", "sign"])
def test_contrasts_are_the_rules_confidence_sequence_at_alpha_over_3(db, test: str) -> None:
    rule = DecideRule(**{**RULE.__dict__, "test": test})
    fac = db.factorial("adaptive", decide=rule)
    _check(fac, rule, list(range(N)))
    kind = "sign-test" if test == "sign" else "mixture-t"
    assert fac.rule == (f"anytime-valid {kind} intervals, Bonferroni over the 3 contrasts: "
                        "each CI at 98.33 %, family-wise error <= 5 %")
    assert fac.sentence().endswith(f" [{fac.rule}].")
    if test == "mixture_t":  # the verdicts, pinned
        assert fac.effects["verdict"].to_list() == ["within noise", "better", "better"]


def test_cells_are_the_leaderboards_anytime_valid_rows(db) -> None:
    fac = db.factorial("adaptive", decide=RULE)
    board = {r["variant"]: r for r in
             db.leaderboard("adaptive", decide=RULE).iter_rows(named=True)}
    fixed = {r["variant"]: r for r in db.leaderboard("adaptive").iter_rows(named=True)}
    cells = {(r["a"], r["b"]): r for r in fac.cells.iter_rows(named=True)}
    assert {k: r["variant"] for k, r in cells.items()} == CELLS
    for cell, variant in CELLS.items():
        for col in ("n", "delta_pct", "ci_low_pct", "ci_high_pct", "ci_level", "ci_method",
                    "verdict"):
            assert cells[cell][col] == board[variant][col], (variant, col)
        if variant != "baseline":  # not compare.py's fixed-n rows
            assert cells[cell]["ci_method"] == "anytime-valid"
            assert cells[cell]["ci_low_pct"] != fixed[variant]["ci_low_pct"]
    assert fac.cell_rule.startswith("anytime-valid mixture-t intervals, Bonferroni over the 4 ")


def test_contrasts_read_seeds_in_the_rows_pair_order(db) -> None:
    keys = {r["variant"]: r["group_key"] for r in db.leaderboard("adaptive").iter_rows(
        named=True)}
    order = list(range(N))[::-1]  # each look read one seed's three pairs, the last seed first
    rows = [keys[v] for v in CELLS.values() if v != "baseline"]
    for s in order:
        db.record_look("adaptive", [(k, s) for k in rows],
                       [{"group_key": k, "n": 0, "incomplete": 0, "mean": None, "low": None,
                         "high": None, "verdict": "undecided"} for k in rows], 1)
    read = dict(db.decide_rows("adaptive", RULE).select("group_key", "read_seeds").iter_rows())
    assert {tuple(read[k]) for k in rows} == {tuple(order)}  # the cells' rows read them so
    c = _contrasts(order)["sparse x gated"]
    assert confseq.read(c, ALPHA).low != pytest.approx(confseq.read(c[::-1], ALPHA).low)
    _check(db.factorial("adaptive", decide=RULE), RULE, order)


def test_an_open_contrast_is_undecided_until_no_cell_gets_seeds(sqlite_url: str) -> None:
    with results_db.open(sqlite_url) as d:
        f2.build(d)  # 4 seeds in every cell: fixed-n t intervals call gated better
        fixed = d.factorial(f2.SWEEP).effects["verdict"].to_list()
        assert fixed == ["within noise", "better", "better"]
        fac = d.factorial(f2.SWEEP, decide=RULE)
        assert fac.effects["verdict"].to_list() == ["undecided"] * 3  # unbounded at 4 seeds
        assert fac.effects["ci_low_pct"].is_null().all()
        assert fac.cells["verdict"].to_list()[1:] == ["needs >= 6 seeds"] * 3
        capped = DecideRule(**{**RULE.__dict__, "max_seeds": 4})  # every cell at its cap
        assert d.factorial(f2.SWEEP, decide=capped).effects["verdict"].to_list() == [
            "inconclusive"] * 3


def test_a_fixed_sweep_and_another_metrics_rule_keep_the_t_reading(db) -> None:
    fixed = db.factorial("adaptive")
    assert fixed.effects["ci_method"].to_list() == ["paired"] * 3
    assert fixed.effects["df"].to_list() == [float(N - 1)] * 3
    assert fixed.rule == ("Bonferroni over the 3 contrasts: each CI at 98.33 %, family-wise "
                          "error <= 5 %")
    other = db.factorial("adaptive", decide=DecideRule(**{**RULE.__dict__,
                                                          "metric": VAL_LOSS}))
    assert other.effects.equals(fixed.effects) and other.cells.equals(fixed.cells)
    assert (other.rule, other.cell_rule) == (fixed.rule, fixed.cell_rule)
