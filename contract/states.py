"""Run states and the one place their transitions are decided (contract: docs/architecture.md).

``pending -> running -> succeeded | failed | diverged | cancelled | lost``. Every write that
changes a run's status goes through :func:`check_transition`, so the rules live here only.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

E = TypeVar("E", bound=StrEnum)


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    DIVERGED = "diverged"
    CANCELLED = "cancelled"
    LOST = "lost"


S = RunStatus
TERMINAL: frozenset[RunStatus] = frozenset({S.SUCCEEDED, S.FAILED, S.DIVERGED, S.CANCELLED, S.LOST})
# What an attempt may end as (finish_attempt); `lost` is the reconciler's, not the worker's.
ATTEMPT_END: frozenset[RunStatus] = frozenset({S.SUCCEEDED, S.FAILED, S.DIVERGED, S.CANCELLED,
                                               S.LOST})
# What claim_run may take (compare-and-set to running): never started, or ended resumably.
CLAIMABLE: frozenset[RunStatus] = frozenset({S.PENDING, S.FAILED, S.LOST})

# What a cancel stops (`cancel --sweep`, a driver the user interrupts): queued or executing.
CANCELLABLE: frozenset[RunStatus] = frozenset({S.PENDING, S.RUNNING})

# The groupings `status` and the dashboard show (one owner: here).
# Finished with a result (succeeded or diverged): kept, so re-submitting the same fingerprint
# is a cache hit; `submit` exits 0 when every run ends here; its summaries are the results.
DONE_OK: frozenset[RunStatus] = frozenset({S.SUCCEEDED, S.DIVERGED})
DONE_BAD: frozenset[RunStatus] = frozenset({S.FAILED, S.CANCELLED})  # ended without a result
LIVE: frozenset[RunStatus] = frozenset({S.RUNNING})  # an attempt holds it (fresh heartbeat)
WAITING: frozenset[RunStatus] = frozenset({S.PENDING, S.LOST})  # needs a driver: submit/rerun
STATUS_GROUPS: dict[str, frozenset[RunStatus]] = {
    "done-ok": DONE_OK, "done-bad": DONE_BAD, "live": LIVE, "waiting": WAITING}


def status_group(status: str | RunStatus) -> str:
    """'done-ok' | 'done-bad' | 'live' | 'waiting' for a run status."""
    st = parse_status(status)
    return next(name for name, members in STATUS_GROUPS.items() if st in members)


class FaultClass(StrEnum):
    """What ended an attempt badly (attempts.fault). The retry policy over these lives in
    orchestrator/run/health/faults.py; the vocabulary lives here, below both the orchestrator and
    the DB."""

    DIVERGED = "diverged"
    CANCELLED = "cancelled"
    OOM = "oom"
    WORKER_DIED = "worker_died"  # the trial process / a rank died (kill -9, segfault, actor died)
    NODE_LOST = "node_lost"  # the Ray node under the attempt is gone
    PREEMPTED = "preempted"  # SIGTERM / lost lease: checkpointed at a step boundary and stopped
    NO_HEARTBEAT = "no_heartbeat"  # silent: the reconciler saw no heartbeat (driver gone too)
    SUPERSEDED = "superseded"  # another attempt took the run over (stale lease)
    DB_UNAVAILABLE = "db_unavailable"  # the results DB could not be written (disk full, ...)
    DB_CONNECTIONS = "db_connections"  # PostgreSQL refused a connection: max_connections used up
    CODE_ERROR = "code_error"  # any other exception


def parse_fault(value: str | FaultClass | None) -> FaultClass | None:
    return None if value is None else _parse(FaultClass, value, "fault", "a fault class")


# A failed attempt with one of these faults leaves the run `lost` (unfinished, resumable by
# submit/rerun from its checkpoint) rather than `failed`: nothing is wrong with the run itself.
# A DB outage past its bound stops the sweep (orchestrator/run/driver/scheduler.py): its unfinished
# runs are as resumable as preempted ones.
RESUMABLE_FAULTS: frozenset[FaultClass] = frozenset({FaultClass.PREEMPTED,
                                                     FaultClass.NO_HEARTBEAT,
                                                     FaultClass.SUPERSEDED,
                                                     FaultClass.DB_UNAVAILABLE})


def run_status_after(attempt_status: str | RunStatus, fault: FaultClass | None) -> RunStatus:
    """The run's status when its current attempt ends as ``attempt_status`` with ``fault``."""
    st = parse_status(attempt_status)
    if st is S.FAILED and fault in RESUMABLE_FAULTS:
        return S.LOST
    return st


# Heartbeats and staleness: an attempt promises a heartbeat every ``heartbeat_s`` seconds
# (stored on its row); it is stale after STALE_BEATS missed beats plus a little slack for a
# busy machine. Seconds, not minutes: a silent death is seen within a few intervals.
DEFAULT_HEARTBEAT_S = 5.0
STALE_BEATS = 3
STALE_SLACK_S = 2.0
# A stale attempt whose process still uses CPU is starved, not dead
# (orchestrator/run/health/liveness.py), and is left alone -- but not forever: silent this long
# while busy, it counts as hung.
MAX_SILENT_S = 300.0


def stale_after_s(heartbeat_s: float | None) -> float:
    """Seconds without a heartbeat after which an attempt (or a driver's lease) is stale."""
    hb = DEFAULT_HEARTBEAT_S if heartbeat_s is None or heartbeat_s <= 0 else heartbeat_s
    return STALE_BEATS * hb + STALE_SLACK_S


_ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    S.PENDING: frozenset({S.RUNNING, S.CANCELLED, S.PENDING}),
    # Never running -> running: a second attempt must win claim_run's compare-and-set, which
    # only takes CLAIMABLE runs (or a running one whose attempt's lease ran out).
    S.RUNNING: TERMINAL,
    S.SUCCEEDED: frozenset({S.PENDING}),  # rerun / --force
    S.DIVERGED: frozenset({S.PENDING}),
    S.CANCELLED: frozenset({S.PENDING}),
    # Ray retries a failed trial in place (FailureConfig): failed/lost -> running by a claim.
    S.FAILED: frozenset({S.PENDING, S.RUNNING}),
    # A lost attempt never comes back: its worker's late report does not move the run.
    S.LOST: frozenset({S.PENDING, S.RUNNING, S.CANCELLED}),
}


class InvalidTransition(ValueError):
    """A status change the state machine does not allow (names the run and both states)."""


def parse_status(value: str | RunStatus, field: str = "status") -> RunStatus:
    return _parse(RunStatus, value, field, "a run status")


def _parse(kind: type[E], value: str | E, field: str, what: str) -> E:
    """``kind(value)``, or a ValueError naming the field and every allowed value."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(m.value for m in kind)
        raise ValueError(f"{field}: {value!r} is not {what}; expected one of {allowed}") \
            from None


def allowed(src: str | RunStatus, dst: str | RunStatus) -> bool:
    return parse_status(dst) in _ALLOWED[parse_status(src)]


def check_transition(run: int | str, src: str | RunStatus, dst: str | RunStatus) -> RunStatus:
    """Return ``dst`` as a RunStatus, or raise InvalidTransition naming the run."""
    dst_s = parse_status(dst)
    if not allowed(src, dst_s):
        ok = ", ".join(sorted(s.value for s in _ALLOWED[parse_status(src)])) or "nothing"
        raise InvalidTransition(f"run {run}: cannot go from {src!s} to {dst_s.value} "
                                f"(from {src!s} it may go to: {ok})")
    return dst_s
