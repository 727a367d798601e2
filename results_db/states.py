"""Run states and the one place their transitions are decided (contract: docs/architecture.md).

``pending -> running -> succeeded | failed | diverged | cancelled | lost``. Every write that
changes a run's status goes through :func:`check_transition`, so the rules live here only.
"""

from __future__ import annotations

from enum import StrEnum


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
# A finished result worth keeping: re-submitting the same fingerprint is a cache hit.
CACHED: frozenset[RunStatus] = frozenset({S.SUCCEEDED, S.DIVERGED})
# What an attempt may end as (finish_attempt); `lost` is the reconciler's, not the worker's.
ATTEMPT_END: frozenset[RunStatus] = frozenset({S.SUCCEEDED, S.FAILED, S.DIVERGED, S.CANCELLED,
                                               S.LOST})

_ALLOWED: dict[RunStatus, frozenset[RunStatus]] = {
    S.PENDING: frozenset({S.RUNNING, S.CANCELLED, S.PENDING}),
    # running -> running: a retry started while the old attempt never reported its end (the
    # old attempt is closed as lost by start_attempt).
    S.RUNNING: frozenset(TERMINAL | {S.RUNNING}),
    S.SUCCEEDED: frozenset({S.PENDING}),  # rerun / --force
    S.DIVERGED: frozenset({S.PENDING}),
    S.CANCELLED: frozenset({S.PENDING}),
    # Ray retries a failed trial in place (FailureConfig): failed/lost -> running directly.
    S.FAILED: frozenset({S.PENDING, S.RUNNING}),
    # A run marked lost whose attempt later reports its end: the worker's word wins.
    S.LOST: frozenset({S.PENDING, S.RUNNING, S.SUCCEEDED, S.FAILED, S.DIVERGED, S.CANCELLED}),
}


class InvalidTransition(ValueError):
    """A status change the state machine does not allow (names the run and both states)."""


def parse_status(value: str | RunStatus, field: str = "status") -> RunStatus:
    try:
        return RunStatus(value)
    except ValueError:
        allowed = ", ".join(s.value for s in RunStatus)
        raise ValueError(f"{field}: {value!r} is not a run status; expected one of {allowed}") \
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
