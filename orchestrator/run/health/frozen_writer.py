"""SQLite: end one of our trials that froze inside a write transaction (docs/cluster.md
"A frozen process holding a lock").

A trial stopped while it holds the SQLite file's write lock (SIGSTOP, a swap storm, a hung
file system) holds it until it wakes or dies. Every other writer waits for it: the other
trials' heartbeats and points, and the driver's own lease renewal, so the driver could never
record the frozen attempt dead (the fault matrix's stall case, when the stop landed inside a
flush). PostgreSQL ends such a session server-side (results_db/engine.py); a SQLite lock can
only be freed by its holder, so the driver ends the holder.

It does so only on evidence that leaves no doubt, read without waiting for the lock (WAL:
readers never wait for the writer):
- the same pid held the write lock at every look for a whole staleness window (our
  transactions last milliseconds), and still holds it;
- that pid is the recorded process of a running attempt this driver claimed, on this host,
  whose heartbeat is stale;
- it made no progress meanwhile (orchestrator/run/health/liveness.py): stopped, or no CPU time. A
  holder that still runs is only starved on a loaded node and will commit; its window starts
  again.
Then SIGKILL: the kernel drops the lock, SQLite rolls the open transaction back whole, Ray
reports the worker dead and Tune retries the run from its last checkpoint (``worker_died``).
A lock held that long by anything else (a user's ``sqlite3`` shell) is named once and left alone.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import results_db
from contract.states import stale_after_s
from orchestrator.run.cluster import parse_host_label
from orchestrator.run.health.liveness import Sample, making_progress, sample

if TYPE_CHECKING:
    from results_db import AttemptRow, ResultsDB

LOOK_EVERY_S = 0.5  # short next to any staleness window: a held lock is seen many times


class FrozenWriterWatch:
    """Context manager: a daemon thread that looks at the write lock every LOOK_EVERY_S."""

    def __init__(self, db: ResultsDB, run_ids: list[int], owner: str, heartbeat_s: float,
                 say: Callable[[str], None]) -> None:
        self.db, self.ids, self.owner, self.say = db, list(run_ids), owner, say
        self.window = stale_after_s(heartbeat_s)
        self._reader: ResultsDB | None = None
        self._holder: int | None = None
        self._since = 0.0
        self._cpu: Sample | None = None  # the holder's CPU time when it was first seen
        self._named: set[int] = set()  # foreign holders already reported
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="frozen-writer", daemon=True)

    def start(self) -> None:
        if results_db.sqlite_database(self.db.url):  # PostgreSQL ends frozen sessions itself
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._reader is not None:
            self._reader.close()

    def __enter__(self) -> FrozenWriterWatch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(LOOK_EVERY_S):
            try:
                self.look(time.monotonic())
            except Exception:  # noqa: BLE001 - a look that fails is tried again next time
                continue

    def look(self, now: float) -> int | None:
        """One look at the lock; returns the pid it killed, if any."""
        pid = self.db.write_lock_holder()
        if pid != self._holder:
            self._holder, self._since = pid, now
            self._cpu = sample(pid) if pid is not None else None
            return None
        if pid is None or now - self._since < self.window:
            return None
        cpu = sample(pid)
        if making_progress(self._cpu, cpu):  # starved, not frozen: it will commit
            self._since, self._cpu = now, cpu
            return None
        att = self._frozen_attempt(pid)
        if att is None:
            if pid not in self._named:
                self._named.add(pid)
                self.say(f"pid {pid} has held the results DB's write lock for "
                         f"{now - self._since:.0f} s and is not a trial of this sweep: every "
                         "writer waits for it (left alone)")
            return None
        if self.db.write_lock_holder() != pid:
            return None  # it let go while we read: not frozen after all
        os.kill(pid, signal.SIGKILL)
        self.say(f"run {att.run_id}: attempt {att.number} (pid {pid}) froze holding the results "
                 f"DB's write lock for {now - self._since:.0f} s; killed it, so the other "
                 "writers go on and the run is retried from its last checkpoint")
        self._holder = None
        return pid

    def _frozen_attempt(self, pid: int) -> AttemptRow | None:
        """The running attempt of ours with process ``pid`` on this host and a stale heartbeat."""
        if self._reader is None:
            self._reader = results_db.open(self.db.url, readonly=True)
        here = socket.gethostname()
        return next((a for a in self._reader.stale_attempts(self.ids)
                     if a.pid == pid and a.owner == self.owner
                     and parse_host_label(a.host)[0] == here), None)
