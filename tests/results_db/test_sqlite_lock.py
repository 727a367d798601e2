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


def test_a_lock_held_past_the_busy_timeout_is_an_outage_to_wait_out(
        tmp_path: Path, monkeypatch) -> None:
    """A write transaction left open longer than the busy timeout (a user's ``sqlite3`` shell,
    a frozen process) made every writer fail with a bare "database is locked", which a trial
    took for a code error: the run failed for good. It is now DBUnavailable, which every
    critical write waits out (orchestrator.dbretry); the points land once the lock is free."""
    import threading

    from orchestrator.dbretry import with_db_retry
    from results_db import engine

    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 300)  # the product waits 30 s
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = results_db.open(url)
    synthdb_run = _one_attempt(db)
    w = subprocess.Popen([sys.executable, "-c", WRITER, url], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert w.stdout is not None and w.stdin is not None
        assert w.stdout.readline().strip() == "held"
        try:
            db.log_metrics(*synthdb_run, [(1, "train/loss", 3.0)])
        except results_db.DBUnavailable as exc:
            assert str(exc) == f"results DB {tmp_path / 'r.db'} could not be written: " \
                               "database is locked"
        else:
            raise AssertionError("a write went through a held lock")
        stdin = w.stdin
        release = threading.Timer(1.5, lambda: (stdin.write("\n"), stdin.flush()))
        release.start()
        with_db_retry(lambda: db.log_metrics(*synthdb_run, [(1, "train/loss", 3.0)]),
                      "writing 1 point", wait_s=30)
        release.join()
    finally:
        w.kill()
        w.wait()
    assert db.metrics(run_ids=[synthdb_run[0]])["value"].to_list() == [3.0]


def _one_attempt(db: results_db.ResultsDB) -> tuple[int, int]:
    from contract.config import RunSpec

    spec = RunSpec(name="r", sweep="s", model={"preset": "tiny"})
    rid = db.register_runs(db.ensure_sweep("s"), [results_db.NewRun(
        name="r", fingerprint=spec.fingerprint(), variant="baseline", seed=0,
        config=spec.model_dump(mode="json"))]).to_run[0].id
    return rid, db.start_attempt(rid, host="h").id
