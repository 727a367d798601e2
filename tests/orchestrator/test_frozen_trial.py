"""A trial frozen inside its heartbeat transaction (SIGSTOP, a swap storm) on PostgreSQL.

The heartbeat locks its run row. Frozen there, it held the lock for good: the driver's lease
renewal (an UPDATE of the same row) waited on it forever, so the driver never recorded the
frozen attempt dead (the fault matrix's stall case failed so under load). The writer's
sessions now carry ``idle_in_transaction_session_timeout`` (results_db/engine.py): the server
ends the frozen session and frees the lock, the driver records the attempt ``worker_died``,
and the woken trial's transaction fails as ``DBUnavailable`` (its retry gets a new
connection) instead of writing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import results_db
from orchestrator.run.health.leases import LeaseKeeper
from tests.support.procstate import all_stopped
from tests.support.synthdb import one_run

pytestmark = pytest.mark.postgres
# A short interval keeps the staleness window near its 2 s floor (3 beats + 2 s = 2.75 s):
# the keeper waits it out after the claim and again after its renewal waited on the lock.
HEARTBEAT_S = 0.25

# The trial: the real DB.heartbeat, stopped by SIGSTOP right after its row locks.
TRIAL = """
import os, signal, sys
import results_db.engine as engine
engine.PG_IDLE_IN_TX_TIMEOUT_S = 0.5  # the test's bound (10 s in the product)
import results_db, results_db.write.claims as claims
real = claims.utcnow
def frozen():  # the heartbeat's timestamp is taken after the run's row lock
    os.kill(os.getpid(), signal.SIGSTOP)  # inside heartbeat(): its run row is locked
    return real()
claims.utcnow = frozen
db = results_db.open(sys.argv[1], migrate=False)
try:
    print("heartbeat ->", db.heartbeat(int(sys.argv[2])))
except Exception as exc:
    print("heartbeat raised", type(exc).__name__, exc)
"""


def test_a_trial_frozen_holding_its_row_lock_is_recorded_dead(pg_url: str) -> None:
    db = results_db.open(pg_url)
    rid = one_run(db, "frozen")
    att = db.claim_run(rid, "driver", "host", heartbeat_s=HEARTBEAT_S)
    assert att is not None
    trial = subprocess.Popen([sys.executable, "-c", TRIAL, pg_url, str(att.id)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not all_stopped(trial.pid):
            assert trial.poll() is None and time.monotonic() < deadline, trial.stdout
            time.sleep(0.05)
        keeper = LeaseKeeper(db, [rid], "driver", heartbeat_s=HEARTBEAT_S)
        ended: list[int] = []

        def ticks() -> None:  # what the driver's lease thread does every interval
            while not ended:
                ended.extend(keeper.tick())
                time.sleep(HEARTBEAT_S)

        t0 = time.monotonic()
        driver = threading.Thread(target=ticks, daemon=True)
        driver.start()
        driver.join(timeout=30)
        assert not driver.is_alive(), "the driver's lease renewal still waits on the frozen lock"
        # dead once its heartbeat is stale (3 beats + 2 s after the claim), not minutes later
        assert ended == [att.id] and time.monotonic() - t0 < 15
        (done,) = db.attempts(rid)
        assert (done.status, done.fault) == ("failed", "worker_died")
    finally:
        os.kill(trial.pid, signal.SIGCONT)
        out, _ = trial.communicate(timeout=60)
    assert "heartbeat raised DBUnavailable" in out, out  # the woken trial writes nothing
    assert db.attempts(rid)[0].heartbeat == att.heartbeat
