"""SIGTERM to a trial process becomes a graceful stop request (graceful preemption).

A Tune function trial trains in a *worker thread* of a Ray actor process: Python runs signal
handlers only in the main thread and refuses to install them from any other, so the trainer's
own SIGTERM handler (trainer/preempt.py) cannot be used there. The Ray worker's main thread has
Ray's handler, which calls ``ray._private.worker.raise_sys_exit_with_custom_error_message`` and
exits the process mid-step ("Fatal Python error: Aborted", no checkpoint, nothing in the DB).

While a trial trains, ``graceful_sigterm(stop)`` replaces that function (looked up by name at
call time) with one that calls ``stop("SIGTERM")`` instead: the DB reporter's ``heartbeat()``
then returns False, the trainer checkpoints at the next step boundary and raises
``trainer.Preempted``, and the attempt is recorded ``failed``/``preempted``. A second SIGTERM
gets Ray's original behaviour (exit now). In the main thread (no Ray) a plain handler does the
same. Ray internals may move: then the patch is skipped with one warning (loud fallback).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)
_RAY_EXIT = "raise_sys_exit_with_custom_error_message"


@contextmanager
def graceful_sigterm(stop: Callable[[str], None]) -> Iterator[bool]:
    """While active, the first SIGTERM calls ``stop("SIGTERM")``; yields whether it could be
    hooked (False: SIGTERM keeps its old meaning)."""
    if threading.current_thread() is threading.main_thread():
        with _main_thread_handler(stop):
            yield True
        return
    try:
        import ray._private.worker as ray_worker
    except ImportError:
        yield False
        return
    original = getattr(ray_worker, _RAY_EXIT, None)
    if original is None:
        log.warning("Ray's worker has no %s: SIGTERM stops this trial abruptly", _RAY_EXIT)
        yield False
        return
    fired = threading.Event()

    def first_term_stops(*args: Any, **kwargs: Any) -> Any:
        if fired.is_set():
            return original(*args, **kwargs)  # the second SIGTERM: exit now
        fired.set()
        stop("SIGTERM")
        return None

    setattr(ray_worker, _RAY_EXIT, first_term_stops)
    try:
        yield True
    finally:
        setattr(ray_worker, _RAY_EXIT, original)


@contextmanager
def _main_thread_handler(stop: Callable[[str], None]) -> Iterator[None]:
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, previous)  # a second SIGTERM: the old meaning
        stop("SIGTERM")

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
