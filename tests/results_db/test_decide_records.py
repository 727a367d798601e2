"""A decide sweep's rule is fixed before its data and its pairs never break, on a real SQLite
results DB with runs registered by the submit path (orchestrator/run/driver/rule_lock.py,
adaptive.py; results_db/write/decide_records.py; results_db/analysis/sequential.py):

- a resubmit that changes the rule is refused and changes no table; ``--change-rule`` records
  the change and every sentence after it says so; a larger budget is no change;
- a budget cut never splits a pair, and a row seed without its baseline seed gets it first;
- a failed baseline rerun appends its pair: a decided verdict never flips back (stored looks);
- a row whose failed pair keeps it from deciding ends "inconclusive (k pairs incomplete)" at
  its cap, not "undecided";
- a one-sided divergence is an outcome: it blocks the mixture t's "better", and is the pair's
  sign for the sign test;
- an adaptive submit to an unreachable Ray address registers nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import results_db
from contract.errors import UserError
from contract.metrics import VAL_PPL
from orchestrator.run.driver import rule_lock
from orchestrator.run.driver.adaptive import Seeds, next_round, run_adaptive
from orchestrator.run.driver.submit import register
from orchestrator.sweep.plan import Plan, make_plan
from tests.support.synthdb import play

SWEEP = """name: adapt
base: {model: {preset: tiny}, train: {steps: 40}}
variants:
  baseline: {}
  gated: {model.gates: [{position: G1}]}
decide: {margin: 0.01, first_seeds: 3, max_seeds: 6, budget: {runs: 40}}
"""


def _plan(tmp_path: Path, text: str = SWEEP) -> Plan:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return make_plan(path)


def _db(tmp_path: Path) -> results_db.ResultsDB:
    return results_db.open(f"sqlite:///{tmp_path / 'r.db'}")


def _run_round(db: results_db.ResultsDB, plan: Plan, value: Callable[[str, int], float],
               end: Callable[[str, int], str] = lambda v, s: "succeeded"
               ) -> list[tuple[str, int]]:
    """Register and play the next round; returns its (variant, seed)s."""
    decide = plan.spec.decide
    assert decide is not None
    runs = next_round(db, plan, Seeds.of(plan), decide, None)
    by_fp = {r.fingerprint: r for r in runs}
    for row in register(db, plan, False, runs=runs).to_run:
        r = by_fp[row.fingerprint]
        status = end(r.variant, r.seed)
        play(db, row.id, status, summaries={VAL_PPL: value(r.variant, r.seed)}
             if status == "succeeded" else None)
    db.record_decide_look(plan.spec.name, decide.rule())
    return sorted((r.variant, r.seed) for r in runs)


def _tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table of a SQLite file, in rowid order."""
    con = sqlite3.connect(path)
    try:
        names = [n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: con.execute(f'SELECT * FROM "{n}"').fetchall() for n in names}
    finally:
        con.close()


def _tight(variant: str, seed: int) -> float:
    base = 10.0 + 0.2 * np.sin(3 * seed)
    return base * 0.9 if variant == "gated" else base


@pytest.mark.parametrize("old, new, named", [
    ("margin: 0.01", "margin: 0.05", "decide.margin: 0.01 -> 0.05"),
    ("margin: 0.01", "margin: 0.01, error_rate: 0.5", "decide.error_rate: 0.05 -> 0.5"),
    ("margin: 0.01", "margin: 0.01, metric: val/loss", "decide.metric: val/ppl -> val/loss"),
    ("max_seeds: 6", "max_seeds: 5", "decide.max_seeds: 6 -> 5"),
    ("runs: 40", "runs: 20", "decide.budget.runs: 40 -> 20 (a budget may only grow)"),
])
def test_a_changed_rule_is_refused_and_changes_no_table(tmp_path: Path, old: str, new: str,
                                                         named: str) -> None:
    db = _db(tmp_path)
    _run_round(db, _plan(tmp_path), _tight)
    before = _tables(tmp_path / "r.db")
    path = tmp_path / "changed.yaml"
    path.write_text(SWEEP.replace(old, new))
    with pytest.raises(UserError) as info:
        run_adaptive(f"sqlite:///{tmp_path / 'r.db'}", make_plan(path), storage=tmp_path / "st",
                     address=None, max_concurrent=None, stale_after=None,
                     console=Console(quiet=True))
    assert named in str(info.value) and "--change-rule" in str(info.value)
    assert "\n" not in str(info.value)
    assert _tables(tmp_path / "r.db") == before  # nothing written, not even the spec text


def test_change_rule_is_recorded_and_said_and_a_larger_budget_is_no_change(
        tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    db = _db(tmp_path)
    _run_round(db, plan, _tight)
    more = _plan(tmp_path, SWEEP.replace("runs: 40", "runs: 80"))
    assert rule_lock.check_rule(db, more, change_rule=False) == []  # a budget may grow
    wider = _plan(tmp_path, SWEEP.replace("margin: 0.01", "margin: 0.05"))
    diffs = rule_lock.check_rule(db, wider, change_rule=True)
    assert diffs == ["decide.margin: 0.01 -> 0.05"]
    rule_lock.record(db, wider, diffs)
    (change,) = db.rule_changes("adapt")
    assert (change.version, change.seeds, change.runs) == (2, 3, 6)
    assert change.differences() == ["margin: 0.01 -> 0.05"]
    decide = wider.spec.decide
    assert decide is not None
    text = db.decide_sentence("adapt", decide.rule())
    assert "The rule changed after 3 seeds (6 runs, " in text and "margin: 0.01 -> 0.05" in text


def test_rows_added_after_the_data_are_a_change(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    db = _db(tmp_path)
    _run_round(db, plan, _tight)
    bigger = _plan(tmp_path, SWEEP.replace("  gated:", "  value: {model.gates: [{position: G2}]}\n"
                                                       "  gated:"))
    with pytest.raises(UserError, match="rows added: value"):
        rule_lock.check_rule(db, bigger, change_rule=False)


def test_a_budget_cut_never_splits_a_pair(tmp_path: Path) -> None:
    """First seeds done, the row open: with 1 run allowed the round takes nothing (a pair is
    2 runs); with the budget raised the pair comes whole. A row seed registered without its
    baseline seed (a cut by an older gatesweep) gets the baseline seed first."""
    plan = _plan(tmp_path)
    db = _db(tmp_path)
    noisy = lambda v, s: 10.0 + (0.3 if (v == "gated") == (s % 2 == 0) else -0.3)  # noqa: E731
    _run_round(db, plan, noisy)
    decide = plan.spec.decide
    assert decide is not None
    seeds = Seeds.of(plan)
    assert next_round(db, plan, seeds, decide, 1) == []
    whole = next_round(db, plan, seeds, decide, 2)
    assert sorted((r.variant, r.seed) for r in whole) == [("baseline", 3), ("gated", 3)]
    lone = seeds.runs[(next(g for g, s in seeds.runs if seeds.runs[(g, s)].variant == "gated"),
                       3)]
    register(db, plan, False, runs=[lone])  # the row's seed 3 without the baseline's
    first = next_round(db, plan, seeds, decide, 1)
    assert [(r.variant, r.seed) for r in first] == [("baseline", 3)]


def test_a_failed_baseline_rerun_never_flips_a_decided_verdict(tmp_path: Path) -> None:
    """Seed 1's baseline fails; the row decides 'better' on the other pairs; the baseline run
    is rerun and gives a value that, read in seed order, would reopen the row. Its pair is
    appended after the recorded looks and the stored history stays decided, same interval."""
    plan = _plan(tmp_path, SWEEP.replace("max_seeds: 6", "max_seeds: 12"))
    db = _db(tmp_path)
    decide = plan.spec.decide
    assert decide is not None
    fail = lambda v, s: "failed" if (v, s) == ("baseline", 1) else "succeeded"  # noqa: E731
    for _ in range(6):
        _run_round(db, plan, _tight, end=fail)
    rows = db.decide_rows("adapt", decide.rule()).row(0, named=True)
    assert rows["verdict"] == "better" and rows["incomplete"] == 1, rows
    decided = (rows["low"], rows["high"])
    runs = db.runs(sweep="adapt", with_config=False)
    (run_id,) = runs.filter(runs["status"] == "failed")["id"].to_list()
    play(db, int(run_id), "succeeded", summaries={VAL_PPL: 7.0})  # gated's seed 1 now +28 %
    db.record_decide_look("adapt", decide.rule())
    after = db.decide_rows("adapt", decide.rule()).row(0, named=True)
    assert after["verdict"] == "better" and (after["low"], after["high"]) == decided
    assert after["read_seeds"][-1] == 1  # appended, not read among the first seeds
    history = db.decide_looks("adapt")["verdict"].to_list()
    first = history.index("better")
    assert set(history[first:]) == {"better"}, history


def test_a_failed_pair_at_the_cap_is_inconclusive_with_its_count(tmp_path: Path) -> None:
    plan = _plan(tmp_path, SWEEP.replace("first_seeds: 3", "first_seeds: 6"))
    db = _db(tmp_path)
    decide = plan.spec.decide
    assert decide is not None
    noisy = lambda v, s: 10.0 + (0.5 if (v == "gated") == (s % 2 == 0) else -0.5)  # noqa: E731
    _run_round(db, plan, noisy, end=lambda v, s: "failed" if (v, s) == ("gated", 2)
               else "succeeded")
    rows = db.decide_rows("adapt", decide.rule()).row(0, named=True)
    assert rows["verdict"] == "inconclusive" and rows["incomplete"] == 1
    assert "1 pair(s) incomplete" in rows["note"]
    assert "1 inconclusive at 6 seeds (1 pairs incomplete)" in db.decide_sentence(
        "adapt", decide.rule())


@pytest.mark.parametrize("test, verdict", [("mixture_t", "undecided"), ("sign", "better")])
def test_a_one_sided_divergence_is_an_outcome(tmp_path: Path, test: str, verdict: str) -> None:
    """Twenty pairs 10 % better, two of them diverged on the variant's side: the mixture t
    cannot size a divergence and will not call 'better' past it; the sign test reads each as
    a worse sign and still decides (18 of 20 signs)."""
    text = SWEEP.replace("first_seeds: 3, max_seeds: 6", f"first_seeds: 20, max_seeds: 24, "
                                                           f"test: {test}")
    plan = _plan(tmp_path, text)
    db = _db(tmp_path)
    decide = plan.spec.decide
    assert decide is not None
    _run_round(db, plan, _tight, end=lambda v, s: "diverged" if v == "gated" and s in (4, 9)
               else "succeeded")
    row = db.decide_rows("adapt", decide.rule()).row(0, named=True)
    assert row["diverged_variant"] == 2 and row["verdict"] == verdict, row
    assert "2 seed(s) diverged on the variant's side only" in row["note"]


def test_an_adaptive_submit_to_an_unreachable_address_registers_nothing(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    with pytest.raises(UserError, match="127.0.0.1:9"):
        run_adaptive(f"sqlite:///{tmp_path / 'r.db'}", plan, storage=tmp_path / "st",
                     address="127.0.0.1:9", max_concurrent=None, stale_after=None,
                     console=Console(quiet=True))
    assert not (tmp_path / "r.db").exists()  # not even opened
