"""Graceful preemption: stop at a step boundary, checkpoint, say so.

Schedulers (Slurm, Kubernetes, spot instances) send SIGTERM some seconds before they kill; an
orchestrator whose attempt was superseded tells the trainer through ``reporter.heartbeat()``
returning False. Either way ``trainer.train`` finishes the step in progress, writes a
checkpoint, flushes the reporter and raises ``Preempted``; the next attempt resumes from that
checkpoint exactly like from any other. Bounded time: one step plus one checkpoint save.

SIGTERM handling (``sigterm_stops``) is installed by ``train()`` only in the main thread (Python
delivers signals there and refuses handlers elsewhere; a trainer running in a worker thread is
stopped through its heartbeat instead). The first SIGTERM asks for the stop; a second one gets
the handler that was there before (the default: terminate now), so an impatient operator is
never ignored. The old handler is restored when training ends.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any


class Preempted(Exception):
    """Training stopped early on request; ``checkpoint`` holds the state after ``step``."""

    def __init__(self, step: int, checkpoint: Path, reason: str) -> None:
        super().__init__(f"preempted at step {step} ({reason}); checkpoint {checkpoint}")
        self.step, self.checkpoint, self.reason = step, Path(checkpoint), reason

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes (Ray, multiprocessing)
        return (Preempted, (self.step, self.checkpoint, self.reason))


class StopRequest:
    """Why training should stop at the next step boundary ('' = keep going)."""

    def __init__(self) -> None:
        self.reason = ""

    def request(self, reason: str) -> None:
        if not self.reason:  # the first reason wins
            self.reason = reason

    def __bool__(self) -> bool:
        return bool(self.reason)


@contextmanager
def sigterm_stops(stop: StopRequest) -> Iterator[bool]:
    """While active, SIGTERM requests a stop; yields whether the handler could be installed."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is None:  # installed from C: not restorable from Python, the default it is
        previous = signal.SIG_DFL

    def handler(signum: int, frame: FrameType | None) -> None:
        if not stop:
            stop.request("SIGTERM")
            return
        _escalate(previous, signum, frame)  # a second SIGTERM: what would have happened

    signal.signal(signal.SIGTERM, handler)
    try:
        yield True
    finally:
        signal.signal(signal.SIGTERM, previous)


def _escalate(previous: Any, signum: int, frame: FrameType | None) -> None:
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:  # SIG_DFL (or unknown, e.g. set from C): terminate
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
