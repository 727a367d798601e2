"""An adaptive (``decide:``) sweep whose fixed-n reading and anytime-valid reading disagree: the
study's answers must be read by the sweep's own rule on every surface.

``adaptive-answers`` (model ``tiny``, one LR 1e-2, val/ppl): the first round of the run room's
own allocation (orchestrator.run.driver.adaptive.next_round: 6 first seeds per row, up to 12),
registered by the submit path and played through the writer API:

- ``g1`` (G1): -2.7 % on average, per seed -1 to -4 %: the fixed-n 95 % t interval
  [-3.81, -1.53] % says "better"; the anytime-valid mixture-t interval at 97.5 % (Bonferroni
  over the 2 rows) is [-6.01, +0.68] %: it still holds 0, so the row needs more seeds;
- ``g2`` (G2): -30 % with a spread of 0.2 pp: better under both rules, with different
  intervals (fixed [-30.57, -29.43] %, anytime [-30.44, -29.56] %).

    python -m tests.support.decide_answers_db sqlite:///adaptive.db
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.metrics import VAL_LOSS, VAL_PPL
from orchestrator.run.driver.adaptive import Seeds, next_round
from orchestrator.run.driver.submit import register
from orchestrator.sweep.plan import make_plan
from tests.support.synthdb import play, sweep_yaml

if TYPE_CHECKING:
    from results_db import ResultsDB

SWEEP = "adaptive-answers"
BASE = (10.0, 10.2, 9.8, 10.0, 10.1, 9.9)  # the baseline's val/ppl, seeds 0-5
# each variant's relative change per seed
CHANGE = {"baseline": (0.0,) * 6,
          "g1": (-0.02, -0.035, -0.01, -0.03, -0.025, -0.04),
          "g2": (-0.30, -0.301, -0.299, -0.30, -0.302, -0.298)}
SPEC: dict[str, Any] = {
    "name": SWEEP, "description": "fixed-n says better where the anytime-valid rule is open",
    "base": {"model": {"preset": "tiny"}, "train": {"steps": 100, "seq_len": 64, "lr": 1e-2}},
    "variants": {"baseline": {}, "g1": {"gate.position": "G1"}, "g2": {"gate.position": "G2"}},
    "decide": {"metric": VAL_PPL, "margin": 0.01, "error_rate": 0.05, "first_seeds": 6,
               "max_seeds": 12}}


def ppl(variant: str, seed: int) -> float:
    return BASE[seed] * (1 + CHANGE[variant][seed])


def build(db: ResultsDB) -> None:
    """Register the sweep's first round in ``db`` and finish every run of it."""
    with tempfile.TemporaryDirectory() as tmp:  # the plan reads its file while registering
        path = Path(tmp) / "sweep.yaml"
        path.write_text(sweep_yaml(SPEC), encoding="utf-8")
        plan = make_plan(path)
        decide = plan.spec.decide
        assert decide is not None
        by_fp = {r.fingerprint: r for r in plan.runs}
        first = next_round(db, plan, Seeds.of(plan), decide, None)
        for row in register(db, plan, False, runs=first).to_run:
            run = by_fp[row.fingerprint]
            y = ppl(run.variant, run.seed)
            play(db, row.id, "succeeded", summaries={VAL_PPL: y, VAL_LOSS: math.log(y)})


def built(folder: Path) -> str:
    """The URL of a fresh SQLite file in ``folder`` holding the sweep."""
    import results_db

    url = f"sqlite:///{folder / 'a.db'}"
    with results_db.open(url) as db:
        build(db)
    return url


def main() -> None:
    import results_db

    with results_db.open(sys.argv[1]) as db:
        build(db)


if __name__ == "__main__":
    main()
