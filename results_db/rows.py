"""Plain value objects exchanged with the orchestrator (no ORM sessions leak out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contract.states import RunStatus
from results_db.schema.tables import DIM_COLUMNS, Attempt, Run


@dataclass(frozen=True)
class NewRun:
    """A run to register; ``config`` is the JSON of its RunSpec
    (``spec.model_dump(mode="json")``), from which the dimension columns are derived."""

    name: str
    fingerprint: str
    variant: str
    seed: int
    config: dict[str, Any]
    params_total: int | None = None
    params_gates: int | None = None


@dataclass(frozen=True)
class RunRow:
    id: int
    name: str
    sweep_id: int
    fingerprint: str
    variant: str
    seed: int
    status: str
    config: dict[str, Any]
    params_total: int | None
    params_gates: int | None
    created: datetime
    updated: datetime
    dims: dict[str, Any] = field(default_factory=dict)  # gate_position, lr, ... (DIM_COLUMNS)
    owner: str | None = None  # the driver that queued/holds it ("submit 3f2a on host x")
    lease_until: datetime | None = None  # that driver's lease (renewed while it lives)

    @classmethod
    def of(cls, r: Run) -> RunRow:
        return cls(id=r.id, name=r.name, sweep_id=r.sweep_id, fingerprint=r.fingerprint,
                   variant=r.variant, seed=r.seed, status=r.status, config=dict(r.config),
                   params_total=r.params_total, params_gates=r.params_gates,
                   created=r.created, updated=r.updated,
                   dims={c: getattr(r, c) for c in DIM_COLUMNS}, owner=r.owner,
                   lease_until=r.lease_until)


@dataclass(frozen=True)
class AttemptRow:
    id: int
    run_id: int
    number: int
    status: str
    started: datetime
    ended: datetime | None
    heartbeat: datetime | None
    host: str
    pid: int | None
    trial_id: str | None
    error: str | None
    traceback: str | None
    owner: str | None = None  # who claimed the run ("submit 3f2a on host x")
    fault: str | None = None  # states.FaultClass value when it ended badly
    heartbeat_s: float | None = None  # the interval it promised (staleness derives from it)

    @classmethod
    def of(cls, a: Attempt) -> AttemptRow:
        return cls(id=a.id, run_id=a.run_id, number=a.number, status=a.status,
                   started=a.started, ended=a.ended, heartbeat=a.heartbeat, host=a.host,
                   pid=a.pid, trial_id=a.trial_id, error=a.error, traceback=a.traceback,
                   owner=a.owner, fault=a.fault, heartbeat_s=a.heartbeat_s)


@dataclass(frozen=True)
class RegisterResult:
    """``cached``: already succeeded/diverged (skipped); ``to_run``: now pending.
    ``running``: already running elsewhere (left alone, added to the contract)."""

    cached: list[RunRow]
    to_run: list[RunRow]
    running: list[RunRow] = field(default_factory=list)


@dataclass(frozen=True)
class NewArtifact:
    """An artifact row to write: a file or folder (``path``) and/or JSON ``data``."""

    kind: str
    path: str | None = None
    data: Any = None


@dataclass(frozen=True)
class AttemptWrite:
    """Everything one flush of a trial's reporter writes, in one transaction
    (``ResultsDB.write_if_current``): metric points (step, name, value), summaries, artifacts,
    the attempt's provenance document, and -- on the attempt's last flush -- how it ended."""

    points: list[tuple[int, str, float | None]] = field(default_factory=list)
    summaries: dict[str, float | None] = field(default_factory=dict)
    artifacts: list[NewArtifact] = field(default_factory=list)
    provenance: dict[str, Any] | None = None
    end: RunStatus | None = None  # one of contract.states.ATTEMPT_END, or None

    def __bool__(self) -> bool:
        return bool(self.points or self.summaries or self.artifacts
                    or self.provenance is not None or self.end is not None)
