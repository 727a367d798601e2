"""The DB-backed Reporter (contract in contract/reporter.py) used inside every trial.

Metric points are buffered and written in batches (every ``flush_points`` points or
``flush_s`` seconds, and at close) because one SQL transaction per log call would dominate a
tiny model's step time. Artifacts and the provenance document ride along: they are written by
the next flush, or by the heartbeat thread within one interval if no flush comes first, and the
last flush also records how the attempt ended (``close(end=...)``). With ``points_ride_on_end``
the points of the final checkpoint go there too -- a 2-step trial writes in two transactions
(claim, end) where it took eight (docs/benchmarks.md).

Liveness does not depend on the training loop: a daemon thread
heartbeats the attempt every ``heartbeat_s`` seconds (DeepSpeed's first init can take a
minute without a single trainer call) and watches for ``orchestrator cancel``; the next
``log``/``heartbeat`` call then raises RunCancelled so the trial ends cleanly.

``db.heartbeat`` (and ``db.write_if_current``, a flush's one transaction) answers whether the
attempt is still the run's current one. Once it is not
(its lease ran out and another attempt claimed the run, its driver recorded it dead while it
stalled, or the reconciler marked it lost), the attempt must stop *without side effects*:
``heartbeat()`` returns False, and every later ``flush()`` raises ``Superseded`` -- buffered
points are dropped, never written over the current attempt's, and since the trainer flushes
before it saves a checkpoint, no checkpoint past this attempt's last written step is made (the
next attempt resumes from one whose points are all in the DB: no gap). The final checkpoint,
saved without that flush under ``points_ride_on_end``, is the one exception: its row goes with
the end, which a superseded attempt never writes, and the next attempt discards a final
checkpoint without a row (runner.drop_unrecorded_final). Each flush asks the DB first (one
heartbeat), so an attempt that wakes from a stall cannot write before it learns.

A results DB that cannot be written (disk full, server restarting) is waited for, up to
``db_wait_s`` (orchestrator/run/health/dbretry.py): the flush blocks, so training pauses instead of
running ahead of what is recorded; past the bound the flush raises and the attempt ends
``db_unavailable``. A driver that gives up on the DB first stops its sweep and says so in the
Ray cluster's key-value store (``sweep_stopped``, orchestrator/run/trial/sweep_stop.py): every
write try asks that flag first, and the heartbeat thread asks it each beat, so a flush that was
waiting when the DB came back, or a trial that trains on until Tune's stop reaches it, writes
nothing after the stop (SweepStopped; the buffered points are dropped, no later checkpoint is
made, and the driver records the attempt's end).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from contract.provenance import ARTIFACT as PROVENANCE
from contract.reporter import CHECKPOINT, Reporter
from contract.states import RunStatus
from orchestrator.run.health.dbretry import with_db_retry
from results_db.rows import AttemptWrite, NewArtifact

if TYPE_CHECKING:
    from results_db import ResultsDB

T = TypeVar("T")
__all__ = ["DBReporter", "Reporter", "RunCancelled", "Superseded", "SweepStopped"]


class RunCancelled(Exception):
    """The run was cancelled in the DB (``orchestrator cancel``) while it was training."""


class Superseded(Exception):
    """This attempt is no longer the run's current one: it must stop and write nothing."""


class SweepStopped(Exception):
    """The attempt's driver stopped the sweep (its DB stayed unusable past the bound): the
    attempt stops and writes nothing more; the driver records how it ended."""


class DBReporter:
    def __init__(self, db: ResultsDB, run_id: int, attempt_id: int, *, flush_points: int = 500,
                 flush_s: float = 5.0, heartbeat_s: float = 5.0,
                 db_wait_s: float = 0.0, points_ride_on_end: bool = False,
                 sweep_stopped: Callable[[], str | None] | None = None) -> None:
        self.db, self.run_id, self.attempt_id = db, run_id, attempt_id
        # why the driver stopped the sweep, or None (sweep_stop.stopped for this driver)
        self._sweep_stopped = sweep_stopped or (lambda: None)
        self._stopped_why: str | None = None
        # contract/reporter.py; only for a caller that discards an unrecorded final checkpoint
        # before it resumes (runner.drop_unrecorded_final)
        self.points_ride_on_end = points_ride_on_end
        self.db_wait_s = db_wait_s
        self.flush_points, self.flush_s = flush_points, flush_s
        self._points: list[tuple[int, str, float | None]] = []
        self._summaries: dict[str, float | None] = {}
        self._artifacts: list[NewArtifact] = []
        self._provenance: dict[str, Any] | None = None  # the attempt's, until written
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        self._cancelled = threading.Event()
        self._superseded = threading.Event()
        self.stop_reason = ""  # set by request_stop (SIGTERM): heartbeat() answers False
        self._stop = threading.Event()
        self.first_step: int | None = None  # the first step this attempt logged (resume proof)
        self._beat = threading.Thread(target=self._beat_loop, args=(heartbeat_s,),
                                      name=f"heartbeat-run{run_id}", daemon=True)
        self._beat.start()

    # --- Reporter contract ---------------------------------------------------------------
    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self._raise_if_cancelled()
        if self.first_step is None:
            self.first_step = int(step)
        with self._lock:
            self._points.extend((int(step), k, float(v)) for k, v in metrics.items())
            due = (len(self._points) >= self.flush_points
                   or time.monotonic() - self._last_flush >= self.flush_s)
        if due:
            self.flush()

    def summary(self, metrics: Mapping[str, float]) -> None:
        with self._lock:
            self._summaries.update({k: float(v) for k, v in metrics.items()})

    def heartbeat(self) -> bool:
        """False once the attempt is no longer the run's current one: the caller must stop.
        (The thread does the writing; the trainer's call is where the news surfaces.) A
        checkpoint's row buffered since the last call is written now, one transaction per
        checkpoint: the checkpoint exists, and an attempt that stalls or dies right after it
        must not lose its record (the trainer makes no call after its last save: that row
        goes with the attempt's end)."""
        self._raise_if_cancelled()
        with self._lock:
            pending = any(a.kind == CHECKPOINT for a in self._artifacts)
        if pending:
            try:
                self.flush()
            except (Superseded, SweepStopped):
                return False
        return not (self._superseded.is_set() or self.stop_reason)

    def request_stop(self, reason: str) -> None:
        """Ask the trainer to stop at its next step boundary (orchestrator/run/trial/sigterm.py)."""
        self.stop_reason = self.stop_reason or reason

    def artifact(self, kind: str, payload: str | Path | Mapping[str, Any]) -> None:
        """Buffered: written by the next flush, or by the heartbeat thread within one
        interval, in the flush's own "still current?" transaction."""
        self._raise_if_superseded()
        with self._lock:
            if kind == PROVENANCE and not isinstance(payload, (str, Path)):
                # one row per attempt in its own table (results_db/write/provenance.py), not a blob
                self._provenance = dict(payload)
            elif isinstance(payload, (str, Path)):
                self._artifacts.append(NewArtifact(kind, path=str(payload)))
            else:
                self._artifacts.append(NewArtifact(kind, data=dict(payload)))

    # --- lifecycle -----------------------------------------------------------------------
    def flush(self, end: RunStatus | None = None) -> bool:
        """Write the buffered points, summaries and artifacts -- and ``end``, the attempt's
        final status, when given -- in one transaction. True when ``end`` was recorded (False:
        none given, or the run was cancelled meanwhile: the points are kept, the caller ends
        the attempt). Raises Superseded (dropping them) when the attempt is no longer
        current, DBOutage when the DB stays unwritable."""
        with self._lock:
            w = AttemptWrite(self._points, self._summaries, self._artifacts, self._provenance,
                             end)
            self._points, self._summaries, self._artifacts, self._provenance = [], {}, [], None
            self._last_flush = time.monotonic()
        self._raise_if_superseded()
        if not w:
            return False

        def write() -> bool:
            # One transaction asks first (a stalled attempt may have woken up), beats and
            # writes; a cancelled run, no longer current, still takes this attempt's last points.
            if self.db.write_if_current(self.run_id, self.attempt_id, w):
                return end is not None
            if end is not None and self._ended_as(end):
                return True  # a retry of a commit whose answer was lost: it is written
            if self._cancelled_else_superseded():
                self._write_unchecked(w)
            return False

        ended = self._write(f"{len(w.points)} metric points", write)
        self._raise_if_superseded()
        return ended

    def close(self, end: RunStatus | None = None) -> bool:
        """Stop heartbeating and write what is buffered, with ``end`` (see flush); without
        it, call finish_attempt after."""
        self._stop.set()
        self._beat.join(timeout=10)
        return self.flush(end)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def superseded(self) -> bool:
        return self._superseded.is_set()

    def _raise_if_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise RunCancelled(f"run {self.run_id} was cancelled")

    def _raise_if_superseded(self) -> None:
        if self._superseded.is_set():
            raise Superseded(f"run {self.run_id}: attempt {self.attempt_id} is no longer the "
                             "run's current one (another attempt holds it, or its driver "
                             "recorded it dead); it stops without writing")

    def _still_current(self) -> bool:
        """One heartbeat, carrying the buffered artifacts if any; False (and superseded)
        once another attempt holds the run or this one was ended. A cancelled run still
        takes this attempt's last points and artifacts."""
        with self._lock:
            w = AttemptWrite(artifacts=self._artifacts, provenance=self._provenance)
            self._artifacts, self._provenance = [], None
        if not w:
            return (self.db.heartbeat(self.attempt_id, self.run_id)
                    or self._cancelled_else_superseded())
        try:
            if self.db.write_if_current(self.run_id, self.attempt_id, w):
                return True
        except Exception:
            with self._lock:  # the next flush or beat writes them
                self._artifacts[:0] = w.artifacts
                self._provenance = self._provenance or w.provenance
            raise
        if self._cancelled_else_superseded():
            self._write_unchecked(w)
            return True
        return False

    def _write_unchecked(self, w: AttemptWrite) -> None:
        """A cancelled run's last writes (it is no longer current, but they are this
        attempt's own): points, summaries, artifacts, provenance -- not the end."""
        self.db.log_metrics(self.run_id, self.attempt_id, w.points)
        self.db.log_summaries(self.run_id, self.attempt_id, w.summaries)
        for a in w.artifacts:
            self.db.add_artifact(self.run_id, self.attempt_id, a.kind, path=a.path, data=a.data)
        if w.provenance is not None:
            self.db.record_provenance(self.run_id, self.attempt_id, w.provenance)

    def _ended_as(self, end: RunStatus) -> bool:
        att = self.db.current_attempt(self.run_id)
        return att is not None and att.id == self.attempt_id and att.status == end

    def _cancelled_else_superseded(self) -> bool:
        """The attempt is no longer current: True (and cancelled) when the user cancelled the
        run, else False (and superseded)."""
        row = self.db.run(self.run_id)
        if row is not None and row.status == RunStatus.CANCELLED:
            self._cancelled.set()
            return True
        self._superseded.set()
        return False

    def _raise_if_sweep_stopped(self) -> None:
        """Asked before every write try: a try that waited out an outage may find the DB back
        after the driver gave up on it (its answer is kept: a stop is never taken back)."""
        if self._stopped_why is None:
            self._stopped_why = self._sweep_stopped()
        if self._stopped_why is not None:
            why = (f"run {self.run_id}: attempt {self.attempt_id} writes nothing more: its "
                   f"driver stopped the sweep ({self._stopped_why})")
            self.request_stop(why)  # heartbeat() answers False: the trainer stops
            raise SweepStopped(why)

    def _write(self, what: str, fn: Callable[[], T]) -> T:
        def guarded() -> T:
            self._raise_if_sweep_stopped()
            return fn()

        return with_db_retry(guarded, f"run {self.run_id}: writing {what}", self.db_wait_s)

    def _beat_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self._raise_if_sweep_stopped()
            except SweepStopped:  # no more beats; the trainer stops at its next step
                return
            try:
                if not self._still_current() and self._superseded.is_set():
                    return  # nothing more to say to a run we no longer hold
            except Exception:  # noqa: BLE001 - a DB hiccup must not kill training; next beat
                continue
