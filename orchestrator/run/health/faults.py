"""Why an attempt ended badly, and whether that is worth another attempt.

The retry policy:

| fault         | example                                              | retried?            |
|---------------|------------------------------------------------------|---------------------|
| diverged      | loss went non-finite (a *result*, not an error)      | never               |
| cancelled     | ``orchestrator cancel`` / SIGTERM                    | never               |
| oom           | ``torch.OutOfMemoryError``, ``MemoryError``, OOM kill | yes                 |
| worker_died   | a rank killed, gloo/NCCL peer gone, actor died       | yes                 |
| node_lost     | Ray node died / unreachable                          | yes                 |
| preempted     | SIGTERM: checkpointed at a step boundary, stopped     | yes (resumes)       |
| no_heartbeat  | silent attempt (reconciler)                           | yes                 |
| db_unavailable| the results DB could not be written (disk full, ...) | no: rerun once fixed|
| db_connections| PostgreSQL's connection slots are used up            | yes (slots free up) |
| code_error    | any other exception (bad data path, a bug)           | only when asked     |

A code error is deterministic: rerunning it burns a GPU slot for the same traceback, so it is
retried only when the sweep asks (``GATESWEEP_RETRY_CODE_ERRORS=1`` until the sweep file has
a field for it; the driver reads it, and each trial gets it on its job, ``TrialJob.policy``: a
trial on another node does not see the driver's environment). Classification looks at
exception *types* first (Ray's and torch's), then at the message text, because the error often
reaches us as a string (Tune's error file, a ``TrainingFailedError`` wrapping a worker's
traceback).
"""

from __future__ import annotations

from dataclasses import dataclass

from contract import env
from contract.states import FaultClass

RETRY_CODE_ERRORS_ENV = "GATESWEEP_RETRY_CODE_ERRORS"


# The vocabulary lives with the DB column it fills (contract.states.FaultClass); the retry
# policy over it lives here.
Fault = FaultClass

TRANSIENT: frozenset[Fault] = frozenset({Fault.OOM, Fault.WORKER_DIED, Fault.NODE_LOST,
                                         Fault.PREEMPTED, Fault.NO_HEARTBEAT,
                                         Fault.DB_CONNECTIONS})

# Exception class names (matched along the MRO, so subclasses count) -> fault. Names, not
# imports: classifying must not import ray or torch.cuda in a process that lacks them.
_TYPE_NAMES: dict[str, Fault] = {
    "OutOfMemoryError": Fault.OOM,  # torch.OutOfMemoryError / torch.cuda.OutOfMemoryError
    "MemoryError": Fault.OOM,
    "OutOfMemoryErrorRay": Fault.OOM,
    "NodeDiedError": Fault.NODE_LOST,
    "WorkerCrashedError": Fault.WORKER_DIED,
    "ActorDiedError": Fault.WORKER_DIED,
    "RayActorError": Fault.WORKER_DIED,
    "ActorUnavailableError": Fault.WORKER_DIED,
    "OwnerDiedError": Fault.WORKER_DIED,
    "LocalRayletDiedError": Fault.NODE_LOST,
    "DistBackendError": Fault.WORKER_DIED,  # a collective whose peer is gone
    "DistNetworkError": Fault.WORKER_DIED,
    "RunCancelled": Fault.CANCELLED,
    "Preempted": Fault.PREEMPTED,  # trainer.Preempted: SIGTERM, checkpointed
    "Superseded": Fault.SUPERSEDED,  # run.trial.reporter: no longer the current attempt
    "RetrySuperseded": Fault.SUPERSEDED,  # run.trial.runner: ... and nobody holds the run
    "KeyboardInterrupt": Fault.CANCELLED,
    "DBConnectionsExhausted": Fault.DB_CONNECTIONS,  # its subclass: no free server slot
    "DBUnavailable": Fault.DB_UNAVAILABLE,  # results_db.DBUnavailable: full disk, read-only
}

# Lower-case substrings of an error text -> fault; the first match wins (order matters:
# "node ... died" must beat the generic "died").
_TEXT_RULES: tuple[tuple[str, Fault], ...] = (
    ("dbconnectionsexhausted", Fault.DB_CONNECTIONS),  # before dbunavailable: its subclass
    ("has no free connection", Fault.DB_CONNECTIONS),
    ("too many clients", Fault.DB_CONNECTIONS),
    ("too many connections for", Fault.DB_CONNECTIONS),
    ("dbunavailable", Fault.DB_UNAVAILABLE),
    ("preempted", Fault.PREEMPTED),
    ("sigterm", Fault.PREEMPTED),  # a worker that died of SIGTERM before checkpointing
    ("was cancelled", Fault.CANCELLED),
    ("out of memory", Fault.OOM),
    ("outofmemoryerror", Fault.OOM),
    ("memoryerror", Fault.OOM),
    ("oom-kill", Fault.OOM),
    ("nodediederror", Fault.NODE_LOST),
    ("node died", Fault.NODE_LOST),
    ("node has died", Fault.NODE_LOST),
    ("node is dead", Fault.NODE_LOST),
    ("node lost", Fault.NODE_LOST),
    ("raylet died", Fault.NODE_LOST),
    ("workercrashederror", Fault.WORKER_DIED),
    ("actordiederror", Fault.WORKER_DIED),
    ("rayactorerror", Fault.WORKER_DIED),
    ("the actor died", Fault.WORKER_DIED),
    ("worker died", Fault.WORKER_DIED),
    ("worker group", Fault.WORKER_DIED),  # Ray Train: "worker group ... failed/unhealthy"
    ("connection closed by peer", Fault.WORKER_DIED),  # gloo: the other rank is gone
    ("connection reset by peer", Fault.WORKER_DIED),
    ("nccl communicator was aborted", Fault.WORKER_DIED),
    ("exited without reporting", Fault.WORKER_DIED),  # trial_sync.DBSyncCallback's text
    ("killed", Fault.WORKER_DIED),
)


def classify(exc: BaseException | None = None, text: str = "") -> Fault:
    """The fault behind ``exc`` and/or an error ``text`` (a traceback, Tune's error file).

    Causes (``__cause__``/``__context__``) are followed: Ray wraps a worker's exception in its
    own error types.
    """
    seen: set[int] = set()
    cur = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        for klass in type(cur).__mro__:
            if klass.__name__ in _TYPE_NAMES:
                found = _TYPE_NAMES[klass.__name__]
                # an outage waited out (dbretry.DBOutage) keeps the more specific cause
                if found is Fault.DB_UNAVAILABLE and _caused_by(cur, "DBConnectionsExhausted"):
                    return Fault.DB_CONNECTIONS
                return found
        text = f"{text}\n{type(cur).__name__}: {cur}"
        cur = cur.__cause__ or cur.__context__
    low = text.lower()
    for needle, fault in _TEXT_RULES:
        if needle in low:
            return fault
    return Fault.CODE_ERROR


def _caused_by(exc: BaseException, name: str) -> bool:
    """Whether an exception class called ``name`` is in ``exc``'s cause chain."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if any(k.__name__ == name for k in type(cur).__mro__):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """A sweep's retry policy: how many attempts after the first, and whether code errors
    count as retryable."""

    retries: int = 0
    retry_code_errors: bool = False

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries: {self.retries} must be >= 0")

    def should_retry(self, fault: Fault) -> bool:
        """Whether this kind of fault deserves another attempt (the count is Ray's job)."""
        if fault in (Fault.DIVERGED, Fault.CANCELLED):
            return False
        if fault is Fault.CODE_ERROR:
            return self.retry_code_errors
        return fault in TRANSIENT

    @classmethod
    def from_env(cls, retries: int) -> RetryPolicy:
        """This process's GATESWEEP_RETRY_CODE_ERRORS: the driver's (a trial uses its job's)."""
        return cls(retries=retries, retry_code_errors=env.flag(RETRY_CODE_ERRORS_ENV))


def should_retry(exc: BaseException | None = None, text: str = "",
                 policy: RetryPolicy | None = None) -> bool:
    """Shorthand: classify, then ask the policy (default: the environment's, 0 retries)."""
    return (policy or RetryPolicy.from_env(0)).should_retry(classify(exc, text))


def describe(fault: Fault, retried: bool) -> str:
    """The suffix the DB error text gets, e.g. ' [worker_died; retried]'."""
    return f" [{fault.value}; {'retried' if retried else 'not retried'}]"
