"""results_db.sqlite_lock: /proc/locks names the process inside a SQLite write transaction,
and nobody else (readers, a process between transactions, another file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import results_db

# A real writer: opens the DB through results_db (WAL, BEGIN IMMEDIATE), then holds a write
# transaction until told to commit; prints 'held' once it holds the lock.
WRITER = """
import sys
import results_db
db = results_db.open(sys.argv[1], migrate=False)
with db.engine.begin() as c:
    c.exec_driver_sql("UPDATE sweeps SET description = 'x'")
    print("held", flush=True)
    sys.stdin.readline()
print("done", flush=True)
sys.stdin.readline()
"""


def test_the_holder_is_the_process_inside_a_write_transaction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = results_db.open(url)
    db.ensure_sweep("s")
    reader = results_db.open(url, readonly=True)
    reader.runs()  # a reader's locks never count
    assert db.write_lock_holder() is None
    w = subprocess.Popen([sys.executable, "-c", WRITER, url], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout is not None and w.stdin is not None
        assert w.stdout.readline().strip() == "held"
        assert db.write_lock_holder() == w.pid
        other = results_db.open(f"sqlite:///{tmp_path / 'other.db'}")
        assert other.write_lock_holder() is None  # another file's lock is not this one's
        w.stdin.write("\n")
        w.stdin.flush()
        assert w.stdout.readline().strip() == "done"
        assert db.write_lock_holder() is None  # between transactions it holds nothing
    finally:
        w.kill()
        w.wait()
    assert results_db.open(f"sqlite:///{tmp_path / 'gone.db'}", migrate=False) \
        .write_lock_holder() is None  # no -shm file yet


def test_postgres_never_names_a_holder(pg_url: str) -> None:
    assert results_db.open(pg_url).write_lock_holder() is None
