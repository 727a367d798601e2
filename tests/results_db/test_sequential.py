"""An adaptive sweep's rows read anytime-validly (results_db/analysis/sequential.py) on a real
SQLite results DB whose runs were registered by the submit path: the pairing with the baseline
by seed, Bonferroni over the rows, Holm on request, diverged seeds counted but not averaged,
and the budget spent."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import results_db
from contract.metrics import VAL_PPL
from results_db.analysis import confseq
from results_db.analysis.decide_rule import DecideRule
from tests.support.synthdb import play, register

RULE = DecideRule(metric=VAL_PPL, margin=0.02, relative=True, error_rate=0.05, max_seeds=12,
                  higher_is_better=False)


def _sweep(tmp_path: Path, values: dict[str, list[float | None]]) -> results_db.ResultsDB:
    """One LR, seeds 0..n-1 per variant; None = the seed diverged."""
    n = max(len(v) for v in values.values())
    spec = {"name": "adapt", "base": {"model": {"preset": "tiny"}, "train": {"steps": 40}},
            "variants": {name: ({} if name == "baseline" else
                                {"model.gates": [{"position": "G1"}]} if name == "gated" else
                                {"model.gates": [{"position": "G2"}]})
                         for name in values},
            "seeds": list(range(n))}
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    for reg in register(db, spec, tmp_path):
        v = values[reg.run.variant][reg.run.seed]
        if v is None:
            play(db, reg.id, "diverged")
        else:
            play(db, reg.id, "succeeded", summaries={VAL_PPL: v})
    return db


def test_rows_pair_by_seed_and_read_the_confidence_sequence(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = 10 + rng.normal(0, 0.3, 10)
    gated = base * (1 - 0.08) + rng.normal(0, 0.05, 10)  # 8 % better, tight pairs
    value = base * (1 + rng.normal(0, 0.2, 10))  # noisy, no effect
    db = _sweep(tmp_path, {"baseline": base.tolist(), "gated": gated.tolist(),
                           "value": value.tolist()})
    rows = db.decide_rows("adapt", RULE)
    assert rows["variant"].to_list() == ["gated", "value"]
    assert rows["family"].to_list() == [2, 2] and rows["level"][0] == pytest.approx(0.975)
    g = rows.row(0, named=True)
    d = (gated - base) / np.abs(base)
    ref = confseq.read(d, 0.05 / 2)
    assert g["n"] == 10 and g["mean"] == pytest.approx(d.mean())
    assert (g["low"], g["high"]) == pytest.approx((ref.low, ref.high))
    assert g["verdict"] == "better" and g["high"] < 0
    v = rows.row(1, named=True)
    assert v["verdict"] == "undecided" and v["more_seeds"] is None or v["more_seeds"] >= 1


def test_a_diverged_seed_is_counted_and_never_averaged(tmp_path: Path) -> None:
    db = _sweep(tmp_path, {"baseline": [10.0, 10.2, 9.9, 10.1, 10.0, 10.3],
                           "gated": [9.0, None, 9.1, 9.2, 9.0, 9.3]})
    row = db.decide_rows("adapt", RULE).row(0, named=True)
    assert row["n"] == 5 and row["n_diverged"] == 1
    assert row["seeds"] == [0, 1, 2, 3, 4, 5]  # seed 1 ran (diverged): it is not run again


def test_three_seeds_never_decide_and_the_cap_says_inconclusive(tmp_path: Path) -> None:
    db = _sweep(tmp_path, {"baseline": [10.0, 10.1, 9.9], "gated": [5.0, 5.1, 4.9]})
    row = db.decide_rows("adapt", RULE).row(0, named=True)
    assert row["verdict"] == "undecided" and math.isinf(row["low"])
    capped = DecideRule(**{**RULE.__dict__, "max_seeds": 3})
    assert db.decide_rows("adapt", capped)["verdict"][0] == "inconclusive"


def test_holm_calls_at_least_what_bonferroni_calls(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    base = 10 + rng.normal(0, 0.3, 8)
    db = _sweep(tmp_path, {"baseline": base.tolist(),
                           "gated": (base * 0.97 + rng.normal(0, 0.04, 8)).tolist(),
                           "value": (base * 0.985 + rng.normal(0, 0.04, 8)).tolist()})
    bonf = db.decide_rows("adapt", RULE)
    holm = db.decide_rows("adapt", RULE, method="holm")
    called = {"better", "worse"}
    assert set(holm.filter(holm["verdict"].is_in(called))["variant"]) >= \
        set(bonf.filter(bonf["verdict"].is_in(called))["variant"])
    assert holm["rule"][0] == "holm"
    with pytest.raises(ValueError, match="rule: expected one of"):
        db.decide_rows("adapt", RULE, method="sidak")


def test_budget_spent_counts_runs_and_attempt_hours(tmp_path: Path) -> None:
    db = _sweep(tmp_path, {"baseline": [10.0, 10.1], "gated": [9.0, 9.1]})
    used = db.decide_spent("adapt")
    assert used.runs == 4 and 0 <= used.wall_hours < 0.1 and used.gpu_hours == 0.0


def test_the_sentence_names_the_rule_and_the_family(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    base = 10 + rng.normal(0, 0.3, 10)
    db = _sweep(tmp_path, {"baseline": base.tolist(),
                           "gated": (base * 0.92 + rng.normal(0, 0.05, 10)).tolist(),
                           "value": (base * (1 + rng.normal(0, 0.2, 10))).tolist()})
    text = db.decide_sentence("adapt", RULE)
    assert "of 2 rows vs the baseline 'baseline' on val/ppl, 1 better, 0 worse" in text
    assert "Bonferroni over 2 rows, family-wise error <= 5 %" in text  # THE rule: METHOD
    assert "after Holm over 2 rows" in db.decide_sentence("adapt", RULE, "holm")


def test_the_leaderboard_of_an_adaptive_sweep_is_read_by_its_own_rule(tmp_path: Path) -> None:
    """Six seeds, -3 % with spread: the fixed-n 95 % t interval excludes 0 ("better"), the
    anytime-valid one at 2.5 % does not (the CPU decide run's G1 elementwise read "better" on
    the plain leaderboard while its interval held 0). With the rule the board's change,
    interval, verdict and method are the decide row's; without it, today's t interval."""
    base = [10.0, 10.4, 9.7, 10.2, 9.9, 10.1]
    gated = [b * f for b, f in zip(base, (0.96, 0.98, 0.95, 0.975, 0.97, 0.99), strict=True)]
    db = _sweep(tmp_path, {"baseline": base, "gated": gated})
    plain = db.leaderboard("adapt", VAL_PPL).filter(~pl.col("is_baseline")).row(0, named=True)
    assert plain["verdict"] == "better" and plain["ci_high_pct"] < 0  # the fixed-n reading
    board = db.leaderboard("adapt", VAL_PPL, decide=RULE)
    row = board.filter(~pl.col("is_baseline")).row(0, named=True)
    ref = db.decide_rows("adapt", RULE).row(0, named=True)
    # the change by compare.py's rule (one delta % everywhere), the interval the decide rule's
    assert row["ci_method"] == "anytime-valid" and row["delta_pct"] == pytest.approx(
        ref["delta_pct"]) == pytest.approx(plain["delta_pct"])
    assert (row["ci_low_pct"], row["ci_high_pct"]) == pytest.approx(
        (ref["low"] * 100, ref["high"] * 100))
    assert ref["low"] < 0 < ref["high"] and row["verdict"].startswith("needs >= ")
    assert board["correction"][0] == "bonferroni" and board["family"][0] == 1
    base_row = board.filter(pl.col("is_baseline")).row(0, named=True)
    assert base_row["verdict"] == "baseline" and base_row["ci_method"] != "anytime-valid"


def test_one_delta_pct_on_every_board(tmp_path: Path) -> None:
    """Every seed of the variant exactly 1.0 below its baseline seed, baselines spread around
    10: the change is -10.0 % of the baseline mean on the decide rows, the decide board, the
    fixed leaderboard and the mean of the per-seed dots (compare.pct_of_base, THE rule) --
    not the mean of per-seed ratios (-10.2 % here), which only the relative test reads."""
    from results_db.analysis.compare import seed_deltas

    base = [8.0, 9.0, 10.0, 11.0, 12.0, 10.0]
    db = _sweep(tmp_path, {"baseline": base, "gated": [b - 1.0 for b in base]})
    rows = db.decide_rows("adapt", RULE).row(0, named=True)
    fixed = db.leaderboard("adapt", VAL_PPL).filter(~pl.col("is_baseline")).row(0, named=True)
    board = db.leaderboard("adapt", VAL_PPL, decide=RULE)
    decided = board.filter(~pl.col("is_baseline")).row(0, named=True)
    runs = db.runs(sweep="adapt", with_config=False)
    values = runs.join(db.summaries(sweep="adapt", names=[VAL_PPL]).select(
        pl.col("run_id").alias("id"), "value"), on="id").select("group_key", "seed", "value")
    dots = seed_deltas(board, values.filter(pl.col("group_key") == decided["group_key"]))
    for got in (rows["delta_pct"], fixed["delta_pct"], decided["delta_pct"],
                float(dots["delta_pct"].mean())):  # type: ignore[arg-type]
        assert got == pytest.approx(-10.0)
    assert decided["delta"] == pytest.approx(-1.0) == fixed["delta"]
    assert rows["mean"] == pytest.approx(np.mean([-1.0 / b for b in base]))  # the test's own
