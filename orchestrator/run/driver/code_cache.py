"""Results of other code: what ``cached_by: config_and_code`` re-queues at ``submit``,
and what ``rerun --sweep S --code-other-than-current`` takes.

"Other code" is results_db's answer (``db.runs_by_code``): the run's newest attempt recorded
another code version than this process's (contract.provenance.code_version: commit plus the
hash of an uncommitted diff), or none at all (trained before provenance was recorded). Such a
run is retrained from step 0: its checkpoints hold the other code's weights (a finished run's
last checkpoint would only be re-evaluated), so they are removed first, only inside the
storage folder (orchestrator/run/driver/rerun.py's rule for ``--fresh``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from contract.provenance import code_version, short_key
from contract.states import DONE_OK, RunStatus
from orchestrator.run.driver.paths import checkpoint_dir
from orchestrator.run.driver.rerun import Placement, SweepRerun, remove_checkpoints

if TYPE_CHECKING:
    from orchestrator.sweep.plan import Plan
    from results_db import RegisterResult, ResultsDB

RESULT_STATES = tuple(sorted(s.value for s in DONE_OK))  # succeeded, diverged: a result


def current_code() -> str:
    """This process's code version key (what a trial started from here would record)."""
    return code_version().key


def requeue_other_code(db: ResultsDB, plan: Plan, res: RegisterResult, storage: Path,
                       say: Callable[[str], object]) -> RegisterResult:
    """``cached_by: config_and_code``: the cached runs (same config) that other code trained go
    back to pending, their checkpoints removed, and move from ``cached`` to ``to_run``.
    ``cached_by: config`` (the default): ``res`` unchanged."""
    if plan.spec.cached_by != "config_and_code" or not res.cached:
        return res
    key = current_code()
    other = set(db.runs_by_code(plan.spec.name, key, states=RESULT_STATES))
    stale = [r for r in res.cached if r.id in other]
    if not stale:
        return res
    say(f"{len(stale)} cached run(s) were trained by other code than {short_key(key)} "
        "(cached_by: config_and_code): they train again from step 0")
    root = storage.resolve()
    for row in stale:
        ckpt = checkpoint_dir(root, plan.spec.name, row.name)
        remove_checkpoints(Placement(ckpt, root), root, say)
    db.set_status([r.id for r in stale], RunStatus.PENDING, strict=True)
    again = [dataclasses.replace(r, status=RunStatus.PENDING.value) for r in stale]
    return dataclasses.replace(res, cached=[r for r in res.cached if r.id not in other],
                               to_run=[*res.to_run, *again])


def code_rerun_plan(db: ResultsDB, sweep: str, statuses: list[str] | None = None) -> SweepRerun:
    """``rerun --sweep S --code-other-than-current``: the runs in ``statuses`` (default: the
    results, succeeded and diverged) whose newest attempt other code trained; the others are
    left alone with the reason."""
    key = current_code()
    wanted = statuses or list(RESULT_STATES)
    take = db.runs_by_code(sweep, key, states=wanted)
    runs = db.runs(sweep, with_config=False, columns=["id", "status"])
    left = [(int(rid), f"{st}: trained by the current code ({short_key(key)})" if st in wanted
             else f"{st}: not in --status {','.join(wanted)}")
            for rid, st in runs.select("id", "status").rows() if rid not in set(take)]
    return SweepRerun(take=take, left=left)
