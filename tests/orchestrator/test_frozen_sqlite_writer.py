"""A trial frozen inside a SQLite write transaction (the SQLite twin of test_frozen_trial.py).

SQLite has no server to end the frozen session: the stopped process held the file's write
lock, every writer (the driver's lease renewal included) waited for it, and the driver never
recorded the attempt dead (the fault matrix's stall case failed so in CI when the SIGSTOP
landed inside a flush). The driver's lease keeper now watches the lock
(orchestrator/run/health/frozen_writer.py): its own stale attempt holding it for a whole staleness
window is killed, the lock is free again, and the attempt ends ``failed`` / ``worker_died``.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import results_db
from contract.states import stale_after_s
from orchestrator.run.health.frozen_writer import LOOK_EVERY_S, FrozenWriterWatch
from orchestrator.run.health.leases import LeaseKeeper
from tests.support.sqlitelock import LockHolder
from tests.support.synthdb import one_run

HOST = f"{socket.gethostname()}/0123456789ab"  # what cluster.host_label() records
# A short interval keeps the staleness window near its 2 s floor (3 beats + 2 s = 2.75 s):
# the watch and the lease keeper wait it out twice, whatever its length.
HEARTBEAT_S = 0.25

# The trial: claims the run itself (the attempt records its pid), then stops itself inside
# the real DB.heartbeat, whose BEGIN IMMEDIATE holds the file's write lock.
TRIAL = """
import os, signal, sys
import results_db, results_db.write.claims as claims
db = results_db.open(sys.argv[1], migrate=False)
att = db.claim_run(int(sys.argv[2]), "driver", sys.argv[3], heartbeat_s=float(sys.argv[4]))
print(att.id, flush=True)
real = claims.utcnow
def frozen():  # the heartbeat's timestamp is taken inside its write transaction
    os.kill(os.getpid(), signal.SIGSTOP)
    return real()
claims.utcnow = frozen
db.heartbeat(att.id)
"""


def test_a_trial_frozen_holding_the_sqlite_write_lock_is_killed_and_recorded(
        sqlite_url: str) -> None:
    db = results_db.open(sqlite_url)
    rid = one_run(db, "frozen")
    trial = subprocess.Popen([sys.executable, "-c", TRIAL, sqlite_url, str(rid), HOST,
                              str(HEARTBEAT_S)],
                             stdout=subprocess.PIPE, text=True)
    said: list[str] = []
    try:
        assert trial.stdout is not None
        att_id = int(trial.stdout.readline())
        deadline = time.monotonic() + 60
        while db.write_lock_holder() != trial.pid:
            assert trial.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        t0 = time.monotonic()
        with LeaseKeeper(db, [rid], "driver", heartbeat_s=HEARTBEAT_S, say=said.append):
            # killed once its heartbeat is stale and it held the lock a whole window
            assert trial.wait(timeout=30) == -signal.SIGKILL
            killed_after = time.monotonic() - t0
            while db.attempts(rid)[0].status == "running":
                assert time.monotonic() - t0 < 30, said
                time.sleep(0.2)
    finally:
        trial.kill()
        trial.wait()
    window = stale_after_s(HEARTBEAT_S)
    assert window <= killed_after < window + 10, killed_after
    assert db.write_lock_holder() is None
    (done,) = db.attempts(rid)
    assert (done.id, done.status, done.fault) == (att_id, "failed", "worker_died")
    assert any(f"attempt 1 (pid {trial.pid}) froze holding the results DB's write lock" in m
               for m in said), said


def test_a_foreign_lock_holder_is_named_and_left_alone(sqlite_url: str) -> None:
    """A process that is not one of the driver's attempts (a user's sqlite3 shell left inside
    a transaction) is never killed: the driver says who holds the lock, once."""
    db = results_db.open(sqlite_url)
    rid = one_run(db, "frozen")
    said: list[str] = []
    with LockHolder(sqlite_url) as shell:
        # the watch alone (the lease keeper's own writes would wait for the shell)
        # the shortest interval: the window is its 2 s floor (the shell has no heartbeat)
        with FrozenWriterWatch(db, [rid], "driver", 0.01, said.append) as watch:
            deadline = time.monotonic() + watch.window + 30
            while not said:  # named once the window has passed
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(2.5 * LOOK_EVERY_S)  # two more looks see the same holder
        assert shell.proc.poll() is None  # alive
        (msg,) = said  # once, however many looks saw it
        assert msg.startswith(f"pid {shell.pid} has held the results DB's write lock for ")
        assert msg.endswith(" s and is not a trial of this sweep: every writer waits for it "
                            "(left alone)")
