"""The driver's Tune callback and stopper that keep the results DB in step with trial events.

A trial records its own end; ``DBSyncCallback`` records the deaths it cannot report itself
(worker killed, node lost, crash before its try block) with their fault class, whether Tune
retries them (``on_trial_recover``) or not (``on_trial_error``). ``OutageStopper`` ends the
sweep once the driver gave up waiting for the DB (orchestrator/run/health/dbretry.py).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ray.tune import Callback, Stopper

import results_db
from contract.states import RunStatus
from orchestrator.run.health.dbretry import DBOutage, OutageState, db_wait_s, with_db_retry
from orchestrator.run.health.faults import Fault, RetryPolicy, classify, describe
from orchestrator.run.health.leases import node_fault
from orchestrator.run.trial.sweep_stop import mark_stopped
from orchestrator.run.trial.trial_job import run_id_of

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

    from results_db import AttemptRow, ResultsDB

# How long a worker death waits for the GCS to declare its node dead (health checks trail the
# raylet's death by a few seconds) before calling it worker_died rather than node_lost.
NODE_GRACE_S = 2.0


class DBSyncCallback(Callback):
    """Driver-side: a trial that died without recording it (worker killed, node lost, crash
    before its try block) still ends its attempt ``failed`` with a fault class and Tune's
    error text -- at once, whether Tune retries it (``on_trial_recover``) or not."""

    def __init__(self, db_url: str, owner: str = "", retries: int = 0,
                 outage: OutageState | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.db_url, self.owner, self.retries = db_url, owner, retries
        self.outage = outage if outage is not None else OutageState(wait_s=db_wait_s())
        self.say = say
        # One handle for the whole experiment, opened at the first death: a handle per death
        # needed a *new* server connection exactly when trials die of a server whose
        # connection slots are used up (fault db_connections), so that death went unrecorded.
        self._db: ResultsDB | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks into the experiment state: not the console (``say``
        holds its lock) nor the DB handle; the driver's live object keeps both."""
        return {**self.__dict__, "say": None, "_db": None}

    def setup(self, stop: Any = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: Any) -> None:
        """Open the handle before any trial runs, one writer and one reader connection in its
        pools (open() checks the schema revision; run(-1) reads), so recording a death never
        needs a server slot that the trials may have used up."""

        try:
            self._db = results_db.open(self.db_url)
            self._db.run(-1)
        except results_db.DBUnavailable:  # opened again at the first death, when it is back
            self._db = None

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def on_trial_recover(self, iteration: int, trials: list[Trial], trial: Trial,
                         **info: Any) -> None:
        self._safely(trial, retried=True)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial,
                       **info: Any) -> None:
        self._safely(trial, retried=False)

    def _safely(self, trial: Trial, retried: bool) -> None:
        """Never let the DB kill the driver from inside Tune: wait out an outage (this
        pauses Tune's loop, so nothing new is scheduled), and past the bound tell the
        stopper to end the sweep (the driver then exits 2 with one line)."""
        if self.outage.expired:
            return  # the sweep is stopping; `rerun --sweep` will see these runs
        try:
            with_db_retry(lambda: self._record(trial, retried),
                          f"recording trial {trial.trial_id}'s end", self.outage.wait_s,
                          say=self.say)
        except DBOutage as exc:
            self.outage.give_up(exc)

    def _record(self, trial: Trial, retried: bool) -> None:
        run_id = run_id_of(trial.config)
        if self._db is None:
            self._db = results_db.open(self.db_url, migrate=False)
        db = self._db
        att = _attempt_of_trial(db, run_id, trial.trial_id, self.owner)
        claimed_here = att is None
        if claimed_here:  # died before its claim: give the error a home, if ours to give
            att = db.claim_run(run_id, self.owner, socket.gethostname(),
                               trial_id=trial.trial_id)
        if att is None or att.status != RunStatus.RUNNING:
            return  # the trial recorded its own end, or another driver holds the run
        text = _trial_error_text(trial)
        fault = classify(None, text)
        if not claimed_here and fault in (Fault.WORKER_DIED, Fault.CODE_ERROR):
            # The trial records its own exceptions; an attempt it left running means its
            # process died. A dead node takes its workers with it: say which.
            fault = node_fault(att.host, grace_s=NODE_GRACE_S)
        retry = retried and RetryPolicy.from_env(self.retries).should_retry(fault)
        first = text.strip().splitlines()[-1] if text.strip() else "?"
        db.finish_attempt(att.id, RunStatus.FAILED, error=f"trial died: {first}"
                          + describe(fault, retry), traceback=text or None, fault=fault)


def _attempt_of_trial(db: ResultsDB, run_id: int, trial_id: str, owner: str
                      ) -> AttemptRow | None:
    """The newest attempt this Tune trial claimed. The owner (this driver) is what makes it
    ours: another driver's trial can carry the same Tune trial id."""
    mine = [a for a in db.attempts(run_id) if a.trial_id == trial_id and a.owner == owner]
    return mine[-1] if mine else None


class OutageStopper(Stopper):
    """Tune stopper: stop every trial once the driver gave up waiting for the DB, and tell
    the trials of driver ``owner`` that are still starting not to claim (sweep_stop.py)."""
    def __init__(self, outage: OutageState | None, owner: str = "") -> None:
        self.outage, self.owner = outage, owner
        self._marked = False

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        if self.outage is None or not self.outage.expired:
            return False
        if self.owner and not self._marked:
            mark_stopped(self.owner, self.outage.error)
            self._marked = True
        return True


def _trial_error_text(trial: Trial) -> str:
    try:
        path = trial.error_file
        if path and Path(path).exists():
            return Path(path).read_text(errors="replace")[-20000:]
    except Exception:  # noqa: BLE001 - best effort: the error file is Tune's, not ours
        pass
    return "the trial process exited without reporting (killed or crashed)"
