"""Results-DB outages made from outside the product: no hook in results_db.

- SQLite: the DB lives on a small tmpfs of its own; ``down()`` fills the file system (after
  truncating the WAL, so the next write must grow a file) and every write fails with
  SQLITE_FULL, exactly as on a full disk; ``up()`` deletes the filler. Needs mount rights
  (root with CAP_SYS_ADMIN, as in the project's CI container); skips with the reason otherwise.
- PostgreSQL: a throwaway server of the test's own (tests.support.pgtemp), really stopped
  (``pg_ctl stop -m fast``) and started again on the same port.

``outage(kind)`` yields an ``Outage`` with ``url``, ``down()``, ``up()`` and
``up_after(seconds)`` (a thread, for "the DB comes back while the caller waits").
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest


@dataclass
class Outage:
    url: str
    kind: str
    _down: Any
    _up: Any
    timers: list[threading.Timer] = field(default_factory=list)

    def down(self) -> None:
        self._down()

    def up(self) -> None:
        self._up()

    def up_after(self, seconds: float) -> None:
        t = threading.Timer(seconds, self._up)
        t.start()
        self.timers.append(t)


@contextlib.contextmanager
def small_fs(size_mb: int = 16) -> Iterator[Path]:
    mnt = Path(tempfile.mkdtemp(prefix="gs-fs-", dir="/tmp"))
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        mnt.rmdir()
        pytest.skip(f"cannot mount a small tmpfs for a full-disk test: "
                    f"{res.stderr.strip() or res.returncode} (needs root / CAP_SYS_ADMIN)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        shutil.rmtree(mnt, ignore_errors=True)


def _fill(mnt: Path, db: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the next write must grow the WAL file
    con.close()
    with open(mnt / "filler", "ab", buffering=0) as f:
        chunk = b"\0" * (1 << 20)
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        for size in (4096, 64, 1):  # the last pages too
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                continue


def _free(mnt: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(mnt / "filler")


@contextlib.contextmanager
def outage(kind: str) -> Iterator[Outage]:
    """An outage-able results DB: ``kind`` is "sqlite" (full disk) or "postgres" (stopped)."""
    if kind == "sqlite":
        with small_fs() as mnt:
            db = mnt / "results.db"
            o = Outage(f"sqlite:///{db}", kind, lambda: _fill(mnt, db), lambda: _free(mnt))
            try:
                yield o
            finally:
                for t in o.timers:
                    t.cancel()
                _free(mnt)
        return
    from tests.support.pgtemp import find_pg_bin, start_pg_server, stop_pg_server

    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries not found; `make system-deps` installs them")
    server = start_pg_server()
    opts = (f"-p {server.port} -k {server.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=200")

    def down() -> None:
        server.pg_ctl("-m", "fast", "-w", "stop")

    def up() -> None:
        server.pg_ctl("-w", "-l", str(server.root / "server.log"), "-o", opts, "start")

    o = Outage(server.url(), kind, down, up)
    try:
        yield o
    finally:
        for t in o.timers:
            t.cancel()
        stop_pg_server(server)
