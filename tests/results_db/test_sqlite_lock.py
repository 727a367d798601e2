"""results_db.write.sqlite_lock: /proc/locks names the process inside a SQLite write transaction,
and nobody else (readers, a process between transactions, another file); a lock held past
the busy timeout is an outage the writers wait out."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import results_db
from orchestrator.run.health.dbretry import with_db_retry
from results_db import engine
from tests.support.sqlitelock import LockHolder
from tests.support.synthdb import one_run


def test_the_holder_is_the_process_inside_a_write_transaction(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = results_db.open(url)
    db.ensure_sweep("s")
    results_db.open(url, readonly=True).runs()  # a reader's locks never count
    assert db.write_lock_holder() is None
    with LockHolder(url) as holder:
        assert db.write_lock_holder() == holder.pid
        other = results_db.open(f"sqlite:///{tmp_path / 'other.db'}")
        assert other.write_lock_holder() is None  # another file's lock is not this one's
        holder.release()
        assert db.write_lock_holder() is None  # between transactions it holds nothing
    fresh = results_db.open(f"sqlite:///{tmp_path / 'gone.db'}", migrate=False)
    assert fresh.write_lock_holder() is None  # no -shm file yet


def test_postgres_never_names_a_holder(pg_url: str) -> None:
    assert results_db.open(pg_url).write_lock_holder() is None


def test_a_lock_held_past_the_busy_timeout_is_an_outage_to_wait_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write transaction left open longer than the busy timeout (a user's ``sqlite3`` shell,
    a frozen process) made every writer fail with a bare "database is locked", which a trial
    took for a code error: the run failed for good. It is now DBUnavailable, which every
    critical write waits out (orchestrator.run.health.dbretry); the points land once the lock is
    free."""
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 300)  # the product waits 30 s
    url = f"sqlite:///{tmp_path / 'r.db'}"
    db = results_db.open(url)
    rid = one_run(db)
    aid = db.start_attempt(rid, host="h").id
    with LockHolder(url) as holder:
        with pytest.raises(results_db.DBUnavailable) as err:
            db.log_metrics(rid, aid, [(1, "train/loss", 3.0)])
        assert str(err.value) == (f"results DB {tmp_path / 'r.db'} could not be written: "
                                  "database is locked")
        # freed during the retry at 0.8 s, which waits up to the busy timeout for it
        release = threading.Timer(1.0, holder.release)
        release.start()
        with_db_retry(lambda: db.log_metrics(rid, aid, [(1, "train/loss", 3.0)]),
                      "writing 1 point", wait_s=30)
        release.join()
    assert db.metrics(run_ids=[rid])["value"].to_list() == [3.0]
