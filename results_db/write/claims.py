"""Attempts: one live attempt per run, enforced by the DB (docs/cluster.md "Claims").

- ``claim_run`` is an atomic compare-and-set: ``UPDATE runs SET status='running' WHERE id=?
  AND status IN ('pending','failed','lost')`` and a check of the row count, in one short
  transaction (SQLite: BEGIN IMMEDIATE serialises writers; PostgreSQL: the UPDATE's row lock
  makes a concurrent claimer wait, re-evaluate the WHERE and match nothing; the usual claim is
  one statement there, _claim_in_one_statement). The loser gets None. A running run is
  taken over only when its attempt's lease ran out (no heartbeat for ``stale_after_s`` of its
  own interval) or when the claimer is the attempt's own *owner*
  (the same driver: it runs each run in one trial at a time, so its earlier process is gone).
  Ownership, not Tune's trial id, decides: two drivers can draw equal trial ids (Tune builds
  them from 20 bits of a uuid1 clock plus the trial index), and an equal id must never let
  one driver take over another's live attempt.
- ``heartbeat`` answers whether the attempt is still the run's current one; the caller must
  stop when it is not. ``finish_attempt`` never lets a non-current or already-ended (lost)
  attempt move the run.
- Row locks in one order everywhere -- run, then its attempts -- so PostgreSQL writers of one
  run wait for each other instead of deadlocking.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, Engine, Result, Row, func, insert, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from contract.states import (
    ATTEMPT_END,
    CLAIMABLE,
    FaultClass,
    InvalidTransition,
    RunStatus,
    check_transition,
    parse_fault,
    parse_status,
    run_status_after,
    stale_after_s,
)
from results_db.rows import AttemptRow
from results_db.schema.tables import Attempt, Run, utcnow
from results_db.write.prepared import Prepared, arg

S = RunStatus


class NotFound(KeyError):
    """A run/attempt/sweep id that is not in the database (the message names it)."""

    def __str__(self) -> str:
        return str(self.args[0])


class ClaimMixin:
    _tx: Callable[[], AbstractContextManager[Session]]
    engine: Engine

    def claim_run(self, run_id: int, owner: str, host: str, trial_id: str | None = None, *,
                  pid: int | None = None, heartbeat_s: float | None = None
                  ) -> AttemptRow | None:
        """Take the run for a new attempt (number n+1, run -> running), or None when another
        live attempt holds it or it is not claimable (succeeded, cancelled, ...)."""
        now = utcnow()
        row = AttemptRow(id=0, run_id=run_id, number=0, status=S.RUNNING, started=now,
                         ended=None, heartbeat=now, host=host,
                         pid=os.getpid() if pid is None else pid, trial_id=trial_id,
                         error=None, traceback=None, owner=owner, heartbeat_s=heartbeat_s)
        values = {k: getattr(row, k) for k in _NEW_ATTEMPT_VALUES}
        if self.engine.dialect.name == "postgresql":
            new = _claim_in_one_statement(self.engine, {**values, "now": now})
            if new is not None:
                return replace(row, id=new.id, number=new.number)
        with self._tx() as s:  # SQLite; PostgreSQL when the run was not there for the taking
            won = _rowcount(_CLAIM.run(s.connection(), {"run_id": run_id, "owner": owner,
                                                        "now": now})) == 1
            if not won:
                run = s.get(Run, run_id, with_for_update=True, populate_existing=True)
                if run is None:
                    raise NotFound(f"claim_run: run id {run_id} does not exist")
                if run.status != S.RUNNING or not _take_over(s, run_id, owner, now):
                    return None
                run.owner, run.updated = owner, now
            # defensive: nothing else may stay running beside the new attempt
            _close_running(s, run_id, *_SUPERSEDED_BY_CLAIM)
            new = _NEW_ATTEMPT.run(s.connection(), {**values, "now": now}).one()
            return replace(row, id=new.id, number=new.number)

    def start_attempt(self, run_id: int, host: str, trial_id: str | None = None,
                      pid: int | None = None, owner: str = "") -> AttemptRow:
        """claim_run that raises InvalidTransition (naming the holder) instead of None."""
        att = self.claim_run(run_id, owner or f"pid {os.getpid()} on {host}", host, trial_id,
                             pid=pid)
        if att is None:
            raise self.claim_refusal(run_id)
        return att

    def claim_refusal(self, run_id: int) -> InvalidTransition:
        """Why claim_run returned None, as an error to raise or print: "run 7 is running
        under submit 3f2a on host x", or "run 7: cannot go from succeeded to running ..."."""
        with self._tx() as s:
            run = s.get(Run, run_id)
            if run is None:
                raise NotFound(f"claim_run: run id {run_id} does not exist")
            if run.status != S.RUNNING:
                try:
                    check_transition(run_id, run.status, S.RUNNING)
                except InvalidTransition as exc:
                    return exc
            cur = _latest(s, run_id)
            holder = (cur.owner if cur is not None and cur.owner else run.owner) or \
                "another attempt"
            host = f" ({cur.host})" if cur is not None and cur.host else ""
            return InvalidTransition(f"run {run_id} is running under {holder}{host}")

    def current_attempt(self, run_id: int) -> AttemptRow | None:
        """The run's newest attempt (the current one while the run is running)."""
        with self._tx() as s:
            att = _latest(s, run_id)
            return None if att is None else AttemptRow.of(att)

    def heartbeat(self, attempt_id: int, run_id: int | None = None) -> bool:
        """Record liveness; False once the attempt is not the run's current one (lost, taken
        over, cancelled, finished): the caller must stop at its next step boundary.
        ``run_id`` (the attempt's run, when the caller knows it) saves a read."""
        with self._tx() as s:
            return beat_if_current(s, attempt_id, "heartbeat", run_id)

    def finish_attempt(self, attempt_id: int, status: str | RunStatus, error: str | None = None,
                       traceback: str | None = None, fault: str | FaultClass | None = None
                       ) -> AttemptRow:
        """End a running attempt; the run follows (states.run_status_after: a preempted
        attempt leaves it lost) only when this is its current attempt and the run is running.
        An attempt that already ended -- including one the reconciler marked lost -- is left
        as it is: the first report wins, and a lost attempt never moves the run."""
        dst, fc = parse_status(status), parse_fault(fault)
        if dst not in ATTEMPT_END:
            raise ValueError(f"finish_attempt: status {dst.value!r} does not end an attempt; "
                             f"expected one of {sorted(s.value for s in ATTEMPT_END)}")
        with self._tx() as s:
            att = s.get(Attempt, attempt_id)
            if att is None:
                raise NotFound(f"finish_attempt: attempt id {attempt_id} does not exist")
            run = _lock_run_then_attempt(s, att)
            if att.status != S.RUNNING:
                return AttemptRow.of(att)
            now = utcnow()
            att.status, att.ended, att.error, att.traceback = dst, now, error, traceback
            att.fault = None if fc is None else fc.value
            if run is not None and run.status == S.RUNNING and _is_latest(s, att):
                run.status = check_transition(run.id, run.status, run_status_after(dst, fc))
                run.updated = now
            s.flush()
            return AttemptRow.of(att)

    def stale_attempts(self, run_ids: Iterable[int] | None = None,
                       stale_after: float | None = None) -> list[AttemptRow]:
        """Running attempts (of ``run_ids``, or all) whose heartbeat is older than
        ``stale_after`` seconds, or than ``stale_after_s`` of their own interval when None."""
        with self._tx() as s:
            q = select(Attempt).where(Attempt.status == S.RUNNING)
            if run_ids is not None:
                q = q.where(Attempt.run_id.in_(list(run_ids)))
            now = utcnow()
            return [AttemptRow.of(a) for a in s.scalars(q) if _stale(a, now, stale_after)]

    def reconcile(self, stale_after_s: float | None = None) -> list[int]:
        """Running runs whose current attempt went silent -> run and attempt ``lost`` (fault
        ``no_heartbeat``). ``stale_after_s`` None: each attempt's own derived threshold."""
        lost: list[int] = []
        with self._tx() as s:
            now = utcnow()
            for run in s.scalars(select(Run).where(Run.status == S.RUNNING).with_for_update()):
                att = _latest(s, run.id)
                if att is not None and att.status == S.RUNNING and not _stale(att, now,
                                                                            stale_after_s):
                    continue
                if att is not None and att.status == S.RUNNING:
                    att.status, att.ended, att.fault = S.LOST, now, FaultClass.NO_HEARTBEAT.value
                    att.error = att.error or (f"lost: no heartbeat for more than "
                                              f"{_threshold(att, stale_after_s):g} s "
                                              f"(last {att.heartbeat or att.started})")
                run.status = check_transition(run.id, run.status, S.LOST)
                run.updated = now
                lost.append(run.id)
        return sorted(lost)

    # --- driver leases on queued runs ------------------------------------------------------
    def renew_leases(self, run_ids: Iterable[int], owner: str, lease_s: float) -> int:
        """The driver ``owner`` still means to run these (pending/failed/lost/running) runs
        for ``lease_s`` seconds more; returns how many rows it renewed."""
        ids = list(run_ids)
        if not ids:
            return 0
        until = utcnow() + timedelta(seconds=lease_s)
        with self._tx() as s:
            return _rowcount(s.execute(update(Run).where(Run.id.in_(ids), Run.status.in_(
                [*CLAIMABLE, S.RUNNING])).values(owner=owner, lease_until=until)
                .execution_options(synchronize_session=False)))

    def release_leases(self, run_ids: Iterable[int], owner: str) -> None:
        """The driver ends: its leases on ``run_ids`` end now (other owners' stay)."""
        ids = list(run_ids)
        if ids:
            with self._tx() as s:
                s.execute(update(Run).where(Run.id.in_(ids), Run.owner == owner)
                          .values(lease_until=None)
                          .execution_options(synchronize_session=False))


def lease_live(lease_until: datetime | None, now: datetime | None = None) -> bool:
    """Whether a driver's lease on a queued run still runs."""
    return lease_until is not None and lease_until > (now or utcnow())


def _threshold(att: Attempt, explicit: float | None) -> float:
    return explicit if explicit is not None else stale_after_s(att.heartbeat_s)


def _stale(att: Attempt, now: datetime, explicit: float | None) -> bool:
    last = att.heartbeat or att.started
    return (now - last).total_seconds() > _threshold(att, explicit)


def _take_over(s: Session, run_id: int, owner: str, now: datetime) -> bool:
    """A running run may be claimed only from a dead holder: an attempt of the claimer's own
    driver (``owner``: a driver runs each run in one trial at a time, so a claim by it means
    the earlier process ended unseen) or an attempt whose lease ran out. Never by trial id:
    two drivers' Tune trial ids can be equal. Closing the old attempt is itself a
    compare-and-set on its status."""
    cur = _latest(s, run_id)
    if cur is None or cur.status != S.RUNNING:
        return True  # an inconsistent row (no live attempt): nothing to protect
    if owner and cur.owner == owner:
        fault, why = FaultClass.WORKER_DIED, ("its driver claimed the run again: the "
                                              "attempt's process ended unseen")
        status = S.FAILED
    elif _stale(cur, now, None):
        fault, why = FaultClass.SUPERSEDED, (f"lease ran out: no heartbeat for more than "
                                             f"{_threshold(cur, None):g} s")
        status = S.LOST
    else:
        return False
    return _rowcount(s.execute(
        update(Attempt).where(Attempt.id == cur.id, Attempt.status == S.RUNNING)
        .values(status=status, ended=now, fault=fault.value, error=why)
        .execution_options(synchronize_session=False))) == 1


def _claim_in_one_statement(engine: Engine, params: dict[str, Any]) -> Row[Any] | None:
    """PostgreSQL's usual claim -- a claimable run -- as one autocommitted statement
    (_CLAIM_IN_ONE: the claim, the defensive close and the new attempt), one round trip
    where the transaction took five; the new attempt's (id, number), or None: the run was
    not there for the taking (held, finished, absent), and claim_run's transaction decides
    who holds it. The statement reads at its start and locks the run after: a claim racing
    another that inserted attempt n+1 meanwhile would insert n+1 too, which
    uq_attempts_run_number refuses, and the transaction (run lock first, then the reads)
    decides again."""
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            return _CLAIM_IN_ONE.run(conn, {**params, **_close_args(*_SUPERSEDED_BY_CLAIM,
                                                                     prefix="closed_")}).first()
    except IntegrityError as exc:
        diag = getattr(exc.orig, "diag", None)  # psycopg's: the constraint it broke
        if getattr(diag, "constraint_name", None) != "uq_attempts_run_number":
            raise
        return None


def _rowcount(result: Result[Any]) -> int:
    """Rows an UPDATE matched (Session.execute types it Result; a DML one is a CursorResult)."""
    return cast(CursorResult[Any], result).rowcount


def _latest(s: Session, run_id: int) -> Attempt | None:
    return s.scalar(select(Attempt).where(Attempt.run_id == run_id)
                    .order_by(Attempt.number.desc()).limit(1)
                    .execution_options(populate_existing=True))


def beat_if_current(s: Session, attempt_id: int, what: str, run_id: int | None = None,
                    end: RunStatus | None = None) -> bool:
    """Inside a writer's transaction: is ``attempt_id`` its run's current attempt (running,
    its run running, no newer attempt)? If so its heartbeat is recorded -- and, given
    ``end``, its end too: call ``end_run`` before the transaction commits -- and the rest of
    the transaction writes as that attempt. Two statements when the caller knows ``run_id``:
    the run's row lock, then one guarded UPDATE of the attempt (its WHERE is re-checked under
    the attempt's row lock) -- the ORM's get/refresh/max reads were four round trips per
    flush, and the end its own UPDATE."""
    if end is not None and end not in ATTEMPT_END:
        raise ValueError(f"{what}: status {end.value!r} does not end an attempt; "
                         f"expected one of {sorted(a.value for a in ATTEMPT_END)}")
    if run_id is None:  # a run id never changes: read without a lock
        run_id = s.scalar(select(Attempt.run_id).where(Attempt.id == attempt_id))
        if run_id is None:
            raise NotFound(f"{what}: attempt id {attempt_id} does not exist")
    # prepared statements (results_db/write/prepared.py): a trial's flush runs these every time
    c = s.connection()
    run_status = _RUN_STATUS_FOR_UPDATE.run(c, {"run_id": run_id}).scalar()
    now = utcnow()
    ids = {"attempt_id": attempt_id, "run_id": run_id, "now": now}
    if run_status == S.RUNNING and _rowcount(
            _BEAT.run(c, ids) if end is None else _BEAT_END.run(c, {**ids, "end": end})) == 1:
        return True
    if s.get(Attempt, attempt_id) is None:  # not current: say so, unless it never existed
        raise NotFound(f"{what}: attempt id {attempt_id} does not exist")
    return False


def end_run(s: Session, run_id: int, end: RunStatus, **columns: Any) -> None:
    """The run's half of an end that ``beat_if_current(..., end=end)`` recorded on its
    attempt in this transaction: the run moves as ``finish_attempt`` would move it, and
    ``columns`` (e.g. the params counts of the attempt's last summaries) ride on the same
    UPDATE."""
    to = check_transition(run_id, S.RUNNING, run_status_after(end, None))
    stmt = _END_RUN.get(tuple(sorted(columns)))
    if stmt is None:
        stmt = _END_RUN[tuple(sorted(columns))] = _end_run_statement(sorted(columns))
    stmt.run(s.connection(), {"run_id": run_id, "to": to, "now": utcnow(), **columns})


def _lock_run_then_attempt(s: Session, att: Attempt) -> Run | None:
    """Row locks in the one order every writer uses -- run, then its attempts. (SQLite: no
    row locks; BEGIN IMMEDIATE already serialises.) Re-reads the attempt under its lock."""
    run = s.get(Run, att.run_id, with_for_update=True)
    s.refresh(att, with_for_update=True)
    return run


def _is_latest(s: Session, att: Attempt) -> bool:
    top = s.scalar(select(func.max(Attempt.number)).where(Attempt.run_id == att.run_id))
    return top == att.number


def _close_running(s: Session, run_id: int, status: RunStatus, fault: FaultClass | None,
                   why: str) -> None:
    _CLOSE_RUNNING.run(s.connection(), {"run_id": run_id, "now": utcnow(),
                                        **_close_args(status, fault, why)})


def close_attempts(s: Session, run_id: int, status: RunStatus, why: str) -> None:
    """Close the run's running attempts (cancel / re-queue), no fault class."""
    _close_running(s, run_id, status, FaultClass.CANCELLED if status == S.CANCELLED else None,
                   why)


# --- the claim's and the end's statements (prepared.py: built once, compiled once) -------
# Each piece is built by one function, so the transactional claim (SQLite, and PostgreSQL's
# rare paths) and PostgreSQL's one-statement claim are the same SQL.
def _claim_update() -> Any:
    """The claim's compare-and-set on the run."""
    return (update(Run).where(Run.id == arg("run_id"), Run.status.in_(sorted(CLAIMABLE)))
            .values(status=S.RUNNING, owner=arg("owner"), updated=arg("now")))


def _close_update(run_matches: Any, prefix: str = "") -> Any:
    """Close the running attempts of the run ``run_matches`` selects; its status, error and
    fault are the arguments ``_close_args(..., prefix)`` names."""
    return (update(Attempt).where(run_matches, Attempt.status == S.RUNNING)
            .values(ended=arg("now"), **{c: arg(prefix + c) for c in _CLOSE_COLUMNS}))


def _close_args(status: RunStatus, fault: FaultClass | None, why: str,
                prefix: str = "") -> dict[str, Any]:
    values = (status, why, None if fault is None else fault.value)
    return {prefix + c: v for c, v in zip(_CLOSE_COLUMNS, values)}


def _next_number(run_id: Any) -> Any:
    """Attempt n+1 of the run, in the INSERT itself: one round trip, not a max() read and an
    ORM flush."""
    return (select(func.coalesce(func.max(Attempt.number), 0) + 1)
            .where(Attempt.run_id == run_id).scalar_subquery())


_CLOSE_COLUMNS = ("status", "error", "fault")
_CLAIM = Prepared(_claim_update)
_CLOSE_RUNNING = Prepared(lambda: _close_update(Attempt.run_id == arg("run_id")))
_NEW_ATTEMPT_VALUES = ("run_id", "status", "host", "pid", "trial_id", "owner", "heartbeat_s")
_NEW_ATTEMPT = Prepared(lambda: insert(Attempt).values(
    number=_next_number(arg("run_id")), started=arg("now"), heartbeat=arg("now"),
    **{k: arg(k) for k in _NEW_ATTEMPT_VALUES}).returning(Attempt.id, Attempt.number))
# what a claim does to an attempt still running beside it (_close_running's arguments)
_SUPERSEDED_BY_CLAIM = (S.LOST, FaultClass.SUPERSEDED, "superseded by a claim")


def _claim_in_one() -> Any:
    """_CLAIM, _CLOSE_RUNNING and _NEW_ATTEMPT as one PostgreSQL statement (data-modifying
    CTEs: the run's row lock is taken by its UPDATE, the attempts' after it). The close's
    arguments are prefixed ``closed_``: the new attempt has a status of its own."""
    won = _claim_update().returning(Run.id).cte("won")
    closed = _close_update(Attempt.run_id.in_(select(won.c.id)), "closed_").cte("closed")
    col = Attempt.__table__.c
    given = [k for k in _NEW_ATTEMPT_VALUES if k != "run_id"]
    return (insert(Attempt).from_select(
        ["run_id", "number", "started", "heartbeat", *given],
        # a SELECT list gives a parameter no type: each is cast to its column's (a NULL
        # would otherwise arrive as text)
        select(won.c.id, _next_number(won.c.id),
               *(sql_cast(arg(src, col[dst].type), col[dst].type)
                 for dst, src in (("started", "now"), ("heartbeat", "now"),
                                  *((k, k) for k in given)))))
        .returning(Attempt.id, Attempt.number).add_cte(won, closed))


_CLAIM_IN_ONE = Prepared(_claim_in_one)
_RUN_STATUS_FOR_UPDATE = Prepared(lambda: select(Run.status).where(Run.id == arg("run_id"))
                                  .with_for_update())


def _beat_statement(end: bool) -> Any:
    """The guarded UPDATE of beat_if_current: the attempt's heartbeat (and end) only while
    it is running and its run's newest."""
    newest = (select(func.max(Attempt.number)).where(Attempt.run_id == arg("run_id"))
              .scalar_subquery())
    values: dict[str, Any] = {"heartbeat": arg("now")}
    if end:
        values.update(status=arg("end"), ended=arg("now"))
    return (update(Attempt).where(Attempt.id == arg("attempt_id"), Attempt.run_id == arg("run_id"),
                                  Attempt.status == S.RUNNING, Attempt.number == newest)
            .values(**values))


_BEAT = Prepared(lambda: _beat_statement(end=False))
_BEAT_END = Prepared(lambda: _beat_statement(end=True))


def _end_run_statement(columns: list[str]) -> Prepared:
    return Prepared(lambda: update(Run).where(Run.id == arg("run_id")).values(
        status=arg("to"), updated=arg("now"), **{c: arg(c) for c in columns}))


_END_RUN: dict[tuple[str, ...], Prepared] = {}  # by the extra columns the end carries


__all__ = ["ClaimMixin", "NotFound", "beat_if_current", "close_attempts", "end_run",
           "lease_live"]
