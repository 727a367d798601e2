"""Seed allocation of a sweep with a ``decide:`` block (orchestrator/run/driver/adaptive.py) on a
real SQLite results DB, runs registered by the submit path and played through the writer API: first
seeds everywhere, then seeds only for undecided rows (with the baseline's seed they pair with), in
seed order, capped by the budget; and the block's located errors. The same driver with real Ray
trials, a killed driver and a resubmit is tests/e2e/test_adaptive_e2e.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import results_db
from contract.errors import SpecError
from contract.metrics import VAL_PPL
from orchestrator.run.driver.adaptive import Seeds, budget_left, next_round
from orchestrator.run.driver.submit import register
from orchestrator.sweep.plan import make_plan
from results_db.analysis.sequential import Spent
from tests.support.decide_sample import TEXT
from tests.support.synthdb import play

SWEEP = TEXT  # the Decide page tests' sweep too (tests/support/decide_sample.py)


def _plan(tmp_path: Path, text: str = SWEEP):  # type: ignore[no-untyped-def]
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return make_plan(path)


def _finish(db: results_db.ResultsDB, plan, rows, values) -> None:  # type: ignore[no-untyped-def]
    by_fp = {r.fingerprint: r for r in plan.runs}
    for row in rows:
        run = by_fp[row.fingerprint]
        play(db, row.id, "succeeded", summaries={VAL_PPL: values(run.variant, run.seed)})


def test_first_seeds_everywhere_then_only_where_a_row_is_open(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    seeds = Seeds.of(plan)
    decide = plan.spec.decide
    assert decide is not None and len(plan.runs) == 3 * 8  # every seed a row may get
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    first = next_round(db, plan, seeds, decide, None)
    assert sorted((r.variant, r.seed) for r in first) == sorted(
        (v, s) for v in ("baseline", "clear", "close") for s in range(3))
    rng = np.random.default_rng(2)
    noise = {s: rng.normal(0, 0.2) for s in range(8)}

    def values(variant: str, seed: int) -> float:
        base = 10.0 + noise[seed]
        return {"baseline": base, "clear": base * 0.7 + 0.01 * seed,
                "close": base * (1 + 0.05 * np.sin(7 * seed))}[variant]

    _finish(db, plan, register(db, plan, False, runs=first).to_run, values)
    # 3 seeds decide nothing (no interval before 5): both rows get their next seed, each with
    # the baseline's seed 3 once
    second = next_round(db, plan, seeds, decide, None)
    assert sorted((r.variant, r.seed) for r in second) == [
        ("baseline", 3), ("clear", 3), ("close", 3)]
    for _ in range(3):
        _finish(db, plan, register(db, plan, False,
                                   runs=next_round(db, plan, seeds, decide, None)).to_run,
                values)
    rows = {r["variant"]: r for r in db.decide_rows("adapt", decide.rule()).to_dicts()}
    assert rows["clear"]["verdict"] == "better" and rows["close"]["verdict"] == "undecided"
    nxt = next_round(db, plan, seeds, decide, None)
    assert sorted((r.variant, r.seed) for r in nxt) == [("baseline", 6), ("close", 6)]
    # the decided row never gets another seed; the open one runs to max_seeds, then nothing
    for _ in range(2):
        _finish(db, plan, register(db, plan, False,
                                   runs=next_round(db, plan, seeds, decide, None)).to_run,
                values)
    have = db.runs(sweep="adapt", with_config=False, columns=["variant", "seed"])
    per = {v: sorted(have.filter(have["variant"] == v)["seed"].to_list())
           for v in ("baseline", "clear", "close")}
    assert per == {"baseline": list(range(8)), "clear": list(range(6)),
                   "close": list(range(8))}
    assert next_round(db, plan, seeds, decide, None) == []
    after = {r["variant"]: r["verdict"] for r in db.decide_rows("adapt", decide.rule()).to_dicts()}
    assert after["close"] != "undecided"  # at max_seeds: decided, or inconclusive


def test_the_budget_caps_a_round_and_stops_the_sweep(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    decide = plan.spec.decide
    assert decide is not None
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    assert len(next_round(db, plan, Seeds.of(plan), decide, 4)) == 4
    assert budget_left(decide, Spent(runs=38, wall_hours=0.0, gpu_hours=0.0)) == 2
    assert budget_left(decide, Spent(runs=41, wall_hours=0.0, gpu_hours=0.0)) == 0
    timed = decide.model_copy(update={"budget": decide.budget.model_copy(
        update={"runs": None, "hours": 0.5})})
    assert budget_left(timed, Spent(runs=3, wall_hours=0.2, gpu_hours=0.0)) is None
    assert budget_left(timed, Spent(runs=3, wall_hours=0.6, gpu_hours=0.0)) == 0


@pytest.mark.parametrize("block, message", [
    ("decide: {margin: 2}", "sweep.yaml:7: decide: decide.margin: a relative margin"),
    ("decide: {first_seeds: 5, max_seeds: 3}", "decide.max_seeds (3) must be at least"),
    ("decide: {error_rate: 0.9}", "sweep.yaml:7: decide.error_rate"),
    ("decide: {budget: {hours: -1}}", "sweep.yaml:7: decide.budget.hours"),
    ("decide: {seeds_max: 3}", "sweep.yaml:7: decide.seeds_max: unknown key"),
    ("seeds: [0, 1]\ndecide: {}", "seeds: decide: allocates the seeds itself"),
])
def test_a_bad_decide_block_is_one_located_error(tmp_path: Path, block: str, message: str
                                                  ) -> None:
    text = SWEEP.rsplit("decide:", 1)[0] + block + "\n"
    with pytest.raises(SpecError) as info:
        _plan(tmp_path, text)
    assert message in str(info.value) and len(info.value.issues) == 1


def test_an_unknown_metric_stops_with_the_key_named(tmp_path: Path) -> None:
    from contract.errors import UserError
    from orchestrator.run.driver.adaptive import _check_metric

    plan = _plan(tmp_path, SWEEP.replace("decide: {", "decide: {metric: val/nope, "))
    decide = plan.spec.decide
    assert decide is not None
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    _check_metric(db, "adapt", decide)  # nothing finished yet: nothing to say
    first = register(db, plan, False, runs=next_round(db, plan, Seeds.of(plan), decide, None))
    _finish(db, plan, first.to_run, lambda v, s: 10.0)
    with pytest.raises(UserError, match="decide.metric: no finished run of adapt has 'val/nope'"):
        _check_metric(db, "adapt", decide)


def test_invalid_runs_are_not_said_to_be_no_variant(tmp_path: Path) -> None:
    """steps <= warmup makes every row invalid: the one error is that, not a decide block
    with "no variant" (the invalid rows are missing from the expansion, not from the file)."""
    text = SWEEP.replace("train: {steps: 40}", "train: {steps: 10, warmup: 40}")
    with pytest.raises(SpecError) as info:
        _plan(tmp_path, text)
    assert "train.warmup: 40 must be below train.steps (10)" in str(info.value)
    assert "no variant" not in str(info.value) and len(info.value.issues) == 1
