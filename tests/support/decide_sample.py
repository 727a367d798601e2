"""A small adaptive (``decide:``) sweep whose seeds were allocated by the run room's own rounds
(orchestrator.run.driver.adaptive.next_round, registered by the submit path, runs played
through the writer API) until one row decided (``clear``: better) and the other had not
(``close``: undecided).

Used by the Decide page's AppTests (tests/dashboard/test_dashboard_decide.py) and by the
browser suite's served app, so the Decide page is opened at 1280 x 800 like every other page.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from contract.metrics import VAL_PPL
from orchestrator.run.driver.adaptive import Seeds, next_round
from orchestrator.run.driver.submit import register
from orchestrator.sweep.plan import make_plan
from tests.support.synthdb import play

if TYPE_CHECKING:
    from results_db import ResultsDB

SWEEP = "adapt"
TEXT = """name: adapt
base: {model: {preset: tiny}, train: {steps: 40}}
variants:
  baseline: {}
  clear: {model.gates: [{position: G1}]}
  close: {model.gates: [{position: G2}]}
decide: {margin: 0.01, first_seeds: 3, max_seeds: 8, budget: {runs: 40}}
"""
ROUNDS = 5  # 3 first seeds, then one per open row per round: 'clear' decides


def fill(db: ResultsDB) -> None:
    """Register and play the sweep ``adapt`` in ``db``, round by round."""
    rng = np.random.default_rng(2)
    noise = {s: rng.normal(0, 0.2) for s in range(8)}

    def value(variant: str, seed: int) -> float:
        base = 10.0 + noise[seed]
        return {"baseline": base, "clear": base * 0.7 + 0.01 * seed,
                "close": base * (1 + 0.05 * np.sin(7 * seed))}[variant]

    with tempfile.TemporaryDirectory() as tmp:  # the plan reads its file while registering
        path = Path(tmp) / "sweep.yaml"
        path.write_text(TEXT, encoding="utf-8")
        plan = make_plan(path)
        decide = plan.spec.decide
        assert decide is not None
        by_fp = {r.fingerprint: r for r in plan.runs}
        seeds = Seeds.of(plan)
        for _ in range(ROUNDS):
            for row in register(db, plan, False,
                                runs=next_round(db, plan, seeds, decide, None)).to_run:
                run = by_fp[row.fingerprint]
                play(db, row.id, "succeeded",
                     summaries={VAL_PPL: value(run.variant, run.seed)})
