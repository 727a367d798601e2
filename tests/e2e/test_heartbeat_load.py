"""Heartbeats that tell a stall from a busy machine, on a real 2-node Ray cluster.

CPU hogs at nice 0 on every core come and go in bursts longer than the staleness window (1 s
heartbeats: stale after 5 s) while a sweep trains. Ray runs its trials at nice 15, so during a
burst a trial gets a few per cent of a core and its heartbeat thread can stay silent past the
window (CI, 2026-12-03: a healthy run recorded `worker_died` under the test suite's own load).
The driver must not record a healthy attempt dead -- and must still catch one that is stopped:
one run is SIGSTOPped for longer than the window, in the middle of the load.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import results_db
from tests.e2e.test_cluster_faults import (
    _assert_integrity,
    _checkpointed_attempt,
    _faults,
    _kill_group,
    _log,
    _submit,
    _sweep,
    _wait,
)

if TYPE_CHECKING:
    from tests.cluster_fixtures import TwoNodes

pytestmark = pytest.mark.slow

# Each core: busy ON_S seconds at nice 0, then OFF_S idle. ON_S > the 5 s window, so a trial
# starved for a burst is silent past it; OFF_S lets the sweep finish in minutes.
ON_S, OFF_S = 9.0, 3.0
HOG = f"""
import time
while True:
    end = time.monotonic() + {ON_S}
    while time.monotonic() < end:
        sum(range(1000))
    time.sleep({OFF_S})
"""


@contextmanager
def _hogs() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen([sys.executable, "-c", HOG])  # nice 0, as the test
             for _ in range(os.cpu_count() or 2)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_no_false_worker_died_under_load_and_a_stopped_trial_is_still_caught(
        ray_two_nodes: TwoNodes, sqlite_url: str, tmp_path: Path) -> None:
    """SQLite: the CI case, and the one where a starved trial may also hold the write lock
    (orchestrator/run/health/frozen_writer.py must not kill it)."""
    db_url = sqlite_url
    # Two runs on the two 1-CPU nodes: one is stopped, the other and the stopped one's retry
    # are the healthy attempts under load (a fresh trial process's start, DeepSpeed's included,
    # and a reused actor's). A third run only queued behind them and trained alone at the end:
    # a third of the test's time and of its hogs' CPU. With GATESWEEP_MAX_SILENT_S=0 (no
    # liveness wait, the behaviour before it existed) the two runs failed the test in 2 of 3
    # tries (2026-12-03, load 6-14: a healthy attempt recorded worker_died); it is a test of
    # chance, as it was with three runs.
    names = ["a", "b"]
    spec = _sweep(tmp_path, "hb-load", names, retries=1, steps=200)
    with _hogs():
        proc = _submit(ray_two_nodes, spec, db_url, tmp_path)
        try:
            att = _wait("a checkpoint", lambda: _checkpointed_attempt(db_url), proc, 400)
            os.kill(att.pid, signal.SIGSTOP)
            try:
                _wait("the driver to record the stopped trial dead", lambda: results_db.open(
                    db_url, migrate=False).attempts(att.run_id)[0].status != "running", proc,
                    60)
            finally:
                time.sleep(1)
                try:
                    os.kill(att.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # stopped inside a SQLite write: the driver killed it
            assert proc.wait(timeout=600) == 0, _log(tmp_path)
        finally:
            _kill_group(proc)
    db = results_db.open(db_url)
    stopped = db.attempts(att.run_id)[0]
    assert (stopped.status, stopped.fault) == ("failed", "worker_died"), stopped
    assert "stopped" in (stopped.error or "") or "killed" in _log(tmp_path), stopped.error
    log = _log(tmp_path)
    for r in db.runs(with_config=False).iter_rows(named=True):
        rid = int(r["id"])
        assert r["status"] == "succeeded", (r["name"], _faults(db, rid), log[-3000:])
        want = ([("failed", "worker_died"), ("succeeded", None)] if rid == att.run_id
                else [("succeeded", None)])
        assert _faults(db, rid) == want, (r["name"], [a.error for a in db.attempts(rid)],
                                         log[-3000:])
        _assert_integrity(db, rid)
