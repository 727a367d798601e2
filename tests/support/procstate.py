"""A process's scheduler state, read from /proc: for tests that stop processes (SIGSTOP).

``kill()`` returns before a signal lands, and each thread stops on its own way out of the
kernel, so "stopped" is a state to wait for, thread by thread.
"""

from __future__ import annotations

import time
from pathlib import Path


def thread_states(pid: int) -> list[str]:
    """The state letter of every thread of ``pid`` (/proc/PID/task/*/stat); [] once gone."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:  # the state follows the command name's closing parenthesis
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):  # the thread ended meanwhile
            continue
    return states


def all_stopped(pid: int) -> bool:
    """Every thread of ``pid`` is stopped (T, t) or exiting (Z, X)."""
    states = thread_states(pid)
    return bool(states) and all(st in "tTZX" for st in states)


def wait_stopped(pid: int, timeout: float = 10) -> None:
    """Until ``all_stopped(pid)``; AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not all_stopped(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"pid {pid}: not every thread stopped within {timeout:g} s")
        time.sleep(0.001)
