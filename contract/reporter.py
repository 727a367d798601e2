"""The Reporter contract: how a training run tells the world what happened.

An implementation that buffers may also define ``flush()``; the trainer calls it (when present)
before every checkpoint, so no point logged before a checkpoint can be lost by a crash after it.
One exception, opted into by a reporter whose ``points_ride_on_end`` is True: the *final*
checkpoint (at ``train.steps``) is saved without that flush, and the reporter writes the
points buffered then together with that checkpoint's record and the run's end, in one write
(the orchestrator's DB reporter: one transaction fewer per run). Its points are then durable
only once that record is: whoever resumes such a run must not resume from a final checkpoint
that has no record (orchestrator/run/trial/runner.py discards it, and the resumed attempt retrains
the steps after the checkpoint before it).

The trainer knows nothing of Ray or SQL. The orchestrator passes a DB-backed reporter
(orchestrator/run/trial/reporter.py); tests pass ``MemoryReporter``. Only rank 0 reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

CHECKPOINT = "checkpoint"  # the artifact kind of a saved checkpoint (its path), after each save


@runtime_checkable
class Reporter(Protocol):
    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """Time-series points at ``step`` (implementations batch the writes)."""

    def summary(self, metrics: Mapping[str, float]) -> None:
        """Final or derived values (last write of a name wins)."""

    def heartbeat(self) -> bool | None:
        """Liveness; called every step. ``False`` means "stop": the trainer checkpoints at the
        next step boundary and raises ``trainer.Preempted`` (None/True: keep going)."""

    def artifact(self, kind: str, payload: str | Path | Mapping[str, Any]) -> None:
        """A file path (checkpoint) or a JSON-able document (histogram)."""


class MemoryReporter:
    """Keeps everything in lists: for tests and for ``python -m trainer`` without a DB."""

    def __init__(self) -> None:
        self.points: list[tuple[int, str, float]] = []
        self.summaries: dict[str, float] = {}
        self.artifacts: list[tuple[str, Any]] = []
        self.heartbeats = 0
        self.alive = True  # what heartbeat() answers; set False to preempt the run

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.points.extend((step, k, float(v)) for k, v in metrics.items())

    def summary(self, metrics: Mapping[str, float]) -> None:
        self.summaries.update({k: float(v) for k, v in metrics.items()})

    def heartbeat(self) -> bool:
        self.heartbeats += 1
        return self.alive

    def artifact(self, kind: str, payload: str | Path | Mapping[str, Any]) -> None:
        self.artifacts.append((kind, payload))

    def series(self, name: str) -> list[tuple[int, float]]:
        """(step, value) pairs of one metric, in logging order."""
        return [(s, v) for s, k, v in self.points if k == name]
