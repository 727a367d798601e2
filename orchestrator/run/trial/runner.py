"""The Tune trial function: claim the run, train one attempt, record how it ended.

- The attempt starts with ``db.claim_run`` (an atomic compare-and-set in the DB): a trial that
  loses the race -- another driver's trial holds the run, or it already finished -- trains
  nothing and reports ``skipped`` with the holder ("run 7 is running under submit 3f2a ...").
- Every end is recorded with its fault class (contract.states.FaultClass): an exception is
  recorded ``failed`` + traceback + fault and re-raised when the policy retries it, so Tune's
  FailureConfig and the DB agree (each retry claims again and resumes from the checkpoint).
- ``trainer.Preempted`` (SIGTERM) is recorded ``failed``/``preempted``: the run becomes
  ``lost`` (resumable). Divergence is a result, not an error; a cancelled run ends quietly.
- A *superseded* attempt (the DB says it is no longer the run's current one: it stalled and
  its driver recorded it dead, or another driver took the run over after its lease ran out)
  stops without writing anything (orchestrator/run/trial/reporter.py). If another attempt holds the
  run, the trial reports ``skipped`` with the holder and its driver waits for that run; if
  nobody does, the trial raises so that Tune retries the run as configured (``retries``).
- A results DB that cannot be used is waited for up to ``job.db_wait_s`` at the claim and at
  every write (orchestrator/run/health/dbretry.py), so a database restart pauses a trial, not ends
  it. Past the bound a claim raises (Tune retries or records it), unless the driver has already
  given up on the same DB: then the trial reports "not started" and prints no traceback.
- A trial whose driver has stopped the sweep (orchestrator/run/trial/sweep_stop.py) does not claim
  its run, and gives back a claim it won in the meantime (the run stays resumable).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from contract.reporter import CHECKPOINT
from contract.states import RunStatus
from orchestrator.run.cluster import host_label
from orchestrator.run.env import prepare_trial_env
from orchestrator.run.health.dbretry import DBOutage, with_db_retry
from orchestrator.run.health.faults import Fault, classify, describe
from orchestrator.run.trial.reporter import DBReporter, RunCancelled, SweepStopped
from orchestrator.run.trial.sigterm import graceful_sigterm
from orchestrator.run.trial.sweep_stop import stopped
from orchestrator.run.trial.trial_db import trial_db
from orchestrator.run.trial.trial_job import TrialJob
from orchestrator.run.trial.trial_result import TrialResult
from results_db import DBUnavailable

if TYPE_CHECKING:
    from results_db import AttemptRow, ResultsDB

T = TypeVar("T")


def run_trial(job: TrialJob) -> None:
    """Inside a Tune trial (multiworker.dispatch_trial): one attempt, reported to Tune."""
    prepare_trial_env()
    from ray import tune

    result = execute_job(job, trial_id=tune.get_context().get_trial_id())
    tune.report(result.report())


def execute_job(job: TrialJob, trial_id: str | None = None) -> TrialResult:
    """Claim and run one attempt of ``job``; how it ended (status, steps, first step, ...)."""
    db = trial_db(job.db_url)  # kept for the next trial of a reused actor
    try:
        attempt = _claim(db, job, trial_id)
    except DBOutage:
        if stopped(job.owner) is None:
            raise  # Tune's FailureConfig and the driver's callback decide (db_connections retry)
        attempt = "stopped"  # the driver gave up on this DB too: no traceback, the sweep is over
    if isinstance(attempt, str) or (attempt is not None and _give_back(db, job, attempt)):
        return TrialResult("skipped", steps=0, holder=f"run {job.name} (id {job.run_id}): "
                           "not started: its driver stopped the sweep")
    if attempt is None:
        return skipped(db, job)
    # trainer.train flushes it before every checkpoint but the final one, whose points ride on
    # the end (drop_unrecorded_final keeps a resume from skipping them): no hole either way
    reporter = DBReporter(db, job.run_id, attempt.id, heartbeat_s=job.heartbeat_s,
                          flush_s=job.flush_s, db_wait_s=job.db_wait_s,
                          points_ride_on_end=True, sweep_stopped=lambda: stopped(job.owner))
    return train_attempt(db, job, attempt.id, reporter)


def _claim(db: ResultsDB, job: TrialJob, trial_id: str | None) -> AttemptRow | str | None:
    """The claim (None: another holder), waiting for the DB up to ``job.db_wait_s``, unless
    the driver has stopped the sweep: then why. The flag is asked before every retry (a
    driver stops its sweep only once the DB failed it too); a first try that wins is checked
    after it (_give_back)."""
    tried = False

    def claim() -> AttemptRow | str | None:
        nonlocal tried
        if tried and (why := stopped(job.owner)) is not None:
            return why
        tried = True
        return db.claim_run(job.run_id, job.owner, host_label(), trial_id=trial_id,
                            heartbeat_s=job.heartbeat_s)

    return with_db_retry(claim, f"run {job.name} (id {job.run_id}): claim", job.db_wait_s)


def _give_back(db: ResultsDB, job: TrialJob, attempt: AttemptRow) -> bool:
    """A claim won just as the driver stopped the sweep: end the attempt at once, unstarted,
    so the run is ``lost`` (resumable) rather than trained for a sweep that is over."""
    if stopped(job.owner) is None:
        return False
    _retry_db(job, "give the claim back", lambda: db.finish_attempt(
        attempt.id, RunStatus.FAILED, error="not started: its driver stopped the sweep",
        fault=Fault.DB_UNAVAILABLE))
    return True


def skipped(db: ResultsDB, job: TrialJob) -> TrialResult:
    """The result of a trial that does not hold its run: who does (its driver waits)."""
    return TrialResult("skipped", steps=0, holder=str(db.claim_refusal(job.run_id)))


class RetrySuperseded(Exception):
    """Raised to Tune by a superseded attempt whose run nobody holds: retry it (Tune's
    FailureConfig decides whether one is left). Classified ``superseded``."""


def train_attempt(db: ResultsDB, job: TrialJob, attempt_id: int, reporter: DBReporter
                  ) -> TrialResult:
    """Train one claimed attempt with ``reporter`` and record its end (rank 0 of a group too)."""
    from trainer.train import train

    try:
        job.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        if reporter.points_ride_on_end:
            drop_unrecorded_final(db, job)
        reporter.artifact("checkpoint_dir", str(job.checkpoint_dir))  # with the first write
        with graceful_sigterm(reporter.request_stop):  # SIGTERM -> checkpoint, Preempted
            res = train(job.spec, reporter, job.checkpoint_dir)
        # The last points, the summary and the end in one transaction: a write that fails
        # fails the attempt. Not ended (the run was cancelled meanwhile): end it here.
        if not reporter.close(end=RunStatus(res.status)):
            _retry_db(job, "record the end", lambda: db.finish_attempt(attempt_id, res.status))
    except RunCancelled:
        close_quietly(reporter)
        return _cancelled(db, attempt_id, reporter)
    except SweepStopped as exc:  # its driver records the end once the DB lets it
        close_quietly(reporter)
        return TrialResult(RunStatus.FAILED, fault=Fault.DB_UNAVAILABLE.value,
                           first_step=reporter.first_step or -1, error=str(exc))
    except BaseException as exc:
        close_quietly(reporter)
        if reporter.cancelled:  # the trainer turned the cancel into its own stop (Preempted)
            return _cancelled(db, attempt_id, reporter)
        return record_failure(db, job, attempt_id, exc, traceback.format_exc(),
                              superseded=reporter.superseded, first_step=reporter.first_step)
    return TrialResult(res.status, steps=res.steps,
                       first_step=-1 if reporter.first_step is None else reporter.first_step,
                       pid=os.getpid())


def drop_unrecorded_final(db: ResultsDB, job: TrialJob) -> None:
    """A final checkpoint (at ``train.steps``) the DB has no row of: its attempt died before
    its end was written, and the points of its last steps rode on that end (DBReporter's
    ``points_ride_on_end``). Resuming from it would leave those steps unlogged, so it is
    discarded: this attempt resumes from the checkpoint before it and logs them again
    (metric writes are upserts). A recorded one is kept (a finished run is re-evaluated)."""
    from trainer import checkpoint

    latest = checkpoint.latest_checkpoint(job.checkpoint_dir)
    if latest is None or latest[0] < job.spec.train.steps:
        return
    paths = _retry_db(job, "read the checkpoint rows",
                      lambda: db.artifact_paths(job.run_id, CHECKPOINT))
    if latest[1].resolve() in {Path(p).resolve() for p in paths if p}:
        return
    print(f"run {job.name} (id {job.run_id}): checkpoint {latest[1].name} has no row in the "
          "results DB (its attempt ended before recording it, with its last points): "
          "discarded, resuming from the one before it", file=sys.stderr, flush=True)
    checkpoint.discard(latest[1])


def close_quietly(reporter: DBReporter) -> None:
    """Close the reporter on a failure path: its last flush may fail for the same reason the
    attempt did (the DB cannot be written); the original error is the one to record."""
    try:
        reporter.close()
    except Exception:  # noqa: BLE001 - the points of a failed flush are dropped, never partial
        pass


def _cancelled(db: ResultsDB, attempt_id: int, reporter: DBReporter) -> TrialResult:
    db.finish_attempt(attempt_id, RunStatus.CANCELLED, error="cancelled by the user",
                      fault=Fault.CANCELLED)
    return TrialResult(RunStatus.CANCELLED, first_step=reporter.first_step or -1)


def record_failure(db: ResultsDB, job: TrialJob, attempt_id: int, exc: BaseException, tb: str,
                   *, superseded: bool = False, first_step: int | None = None) -> TrialResult:
    """Record ``exc`` as the attempt's end (failed + fault + traceback); re-raise it when the
    retry policy wants another attempt, else return the result Tune gets."""
    fault = classify(exc, tb)
    if superseded:
        return _after_superseded(db, job, attempt_id, tb, first_step)
    retry = job.policy.should_retry(fault)
    error = f"{type(exc).__name__}: {exc}" + describe(fault, retry)
    if not finish_failed(db, job, attempt_id, error, tb, fault):
        retry = False  # a retry could not claim the run either: the next submit/rerun will
    if retry or isinstance(exc, KeyboardInterrupt):
        raise exc
    return TrialResult(RunStatus.FAILED, fault=fault.value, first_step=first_step or -1,
                       error=error)


def _after_superseded(db: ResultsDB, job: TrialJob, attempt_id: int, tb: str,
                      first_step: int | None) -> TrialResult:
    """The DB took the run from this attempt, which wrote nothing since. Its end is already
    recorded (finish_attempt leaves an ended attempt as it is; this one is for the rare
    attempt that is still running but no longer the newest). Another holder: skipped, the
    driver waits for it. Nobody: raise, so Tune retries the run as configured."""
    _retry_db(job, "record the end", lambda: db.finish_attempt(
        attempt_id, RunStatus.FAILED, error="stopped: the attempt was superseded", traceback=tb,
        fault=Fault.SUPERSEDED))
    row = _retry_db(job, "read the run", lambda: db.run(job.run_id))
    if row is not None and row.status == RunStatus.RUNNING:
        return skipped(db, job)
    if row is not None and row.status in (RunStatus.FAILED, RunStatus.LOST):
        raise RetrySuperseded(f"run {job.name} (id {job.run_id}): attempt {attempt_id} was "
                              f"superseded while nobody held the run (now {row.status}); "
                              "another attempt resumes it from its last checkpoint")
    return TrialResult("superseded", first_step=first_step or -1)


def _retry_db(job: TrialJob, what: str, fn: Callable[[], T]) -> T:
    return with_db_retry(fn, f"run {job.name} (id {job.run_id}): {what}", job.db_wait_s)


def finish_failed(db: ResultsDB, job: TrialJob, attempt_id: int, error: str, tb: str,
                  fault: Fault) -> bool:
    """Record the attempt ``failed``; False when the DB cannot be written (disk full,
    read-only): then a second, smaller write without the traceback is tried, and if that
    fails too the run stays ``running`` until its heartbeat goes stale and the reconciler
    (submit, rerun) marks it ``lost``; said on stderr, where the trial's log keeps it."""


    # a DB that already stayed unwritable past the bound is not waited for a second time
    wait_s = 0.0 if fault is Fault.DB_UNAVAILABLE else job.db_wait_s
    try:
        with_db_retry(lambda: db.finish_attempt(attempt_id, RunStatus.FAILED, error=error,
                                                traceback=tb, fault=fault),
                      f"run {job.name} (id {job.run_id}): record the end", wait_s)
        return True
    except DBUnavailable as exc:
        try:  # the traceback is the large part; the error line alone may still fit
            db.finish_attempt(attempt_id, RunStatus.FAILED, error=error, fault=fault)
            return True
        except DBUnavailable:
            print(f"run {job.name} (id {job.run_id}): {exc}; the end of attempt {attempt_id} "
                  "is not recorded: the run counts as running until its heartbeat goes stale, "
                  "then lost (orchestrator rerun resumes it)", file=sys.stderr, flush=True)
            return False
