"""The results DB becomes unwritable in the middle of a run (docs/architecture.md, "faults").

A real tiny run through ``orchestrator.run.trial.runner.execute_job`` (the Tune trial's body) on a
real SQLite file. The fault comes from outside the product (tests/support/dbfaults.py, an event
listener on every engine's BEGIN): while its flag file exists the writer's connections cannot grow
the DB (SQLITE_FULL, a full disk) or, when it says ``readonly``, cannot write at all
(SQLITE_READONLY, a file system remounted read-only). The reporter subclass below only switches the
fault on at a step; everything else is the production path.

What must hold: the attempt ends in a state the tool recognises (``failed`` with fault
``db_unavailable`` when its end can still be written, else ``running`` until its heartbeat
goes stale and the reconciler makes it ``lost``); the error names the DB and says it could
not be written; a batch of metrics that failed is absent, never partial; and once space is
back the rerun resumes from the checkpoint and completes the run.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

import orchestrator.run.trial.reporter
import orchestrator.run.trial.runner
import orchestrator.run.trial.trial_db
import results_db
from contract.config import RunSpec
from contract.states import stale_after_s
from orchestrator.run.trial.runner import execute_job
from orchestrator.run.trial.trial_job import TrialJob
from tests.support.dbfaults import db_fault
from tests.support.onejob import registered_job

TRAIN = dict(steps=48, batch_size=4, seq_len=32, warmup=4, log_every=1, eval_every=24,
             eval_batches=2, checkpoint_every=4)
FAULT_AT_STEP = 6


def _spec() -> RunSpec:
    return RunSpec(name="full", sweep="dbfault", model={"preset": "tiny"}, train=TRAIN)


def _setup(tmp_path: Path) -> tuple[results_db.ResultsDB, TrialJob, Path]:
    db, job = registered_job(tmp_path, _spec(),
                             flush_s=0.001, heartbeat_s=0.2,  # every log call is one write
                             db_wait_s=0)  # a lasting outage: not waited for (dbretry.py)
    return db, job, tmp_path / "results.db"


def _fault_reporter(monkeypatch: pytest.MonkeyPatch, start: Callable[[], None],
                    logged: dict[int, set[str]]) -> None:
    """execute_job's DBReporter, switching the fault on after step FAULT_AT_STEP's write."""
    base = orchestrator.run.trial.reporter.DBReporter

    class FaultAt(base):  # type: ignore[misc, valid-type]
        def log(self, step: int, metrics: Mapping[str, float]) -> None:
            logged.setdefault(int(step), set()).update(metrics)
            super().log(step, metrics)
            if step >= FAULT_AT_STEP and not started:
                started.append(step)
                start()

    started: list[int] = []
    monkeypatch.setattr(orchestrator.run.trial.runner, "DBReporter", FaultAt)


def _fill_disk(path: Path, flag: Path) -> None:
    """Use up the DB's free pages (a second connection, clamped at the file's size), then
    clamp the writer too: its next write that needs a page fails like on a full disk."""
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA max_page_count = 1")
    for size in (4096, 512, 64, 8):
        try:
            while True:
                con.execute("INSERT INTO filler VALUES (randomblob(?))", (size,))
        except sqlite3.OperationalError as exc:
            assert "full" in str(exc)
    con.close()
    flag.write_text("full")


def _assert_whole_steps(db: results_db.ResultsDB, run_id: int,
                        logged: dict[int, set[str]]) -> set[int]:
    """Every step in the DB has all the metrics logged at that step: no partial batch."""
    m = db.metrics(run_ids=[run_id])
    stored: dict[int, set[str]] = {}
    for step, name in zip(m["step"].to_list(), m["name"].to_list()):
        stored.setdefault(int(step), set()).add(name)
    for step, names in stored.items():
        assert names == logged[step], f"step {step}: {sorted(names)} != {sorted(logged[step])}"
    return set(stored)


def _rerun_completes(db: results_db.ResultsDB, job: TrialJob, logged: dict[int, set[str]],
                     last_stored: int) -> None:
    """What `orchestrator rerun` does in the trial, without Ray: re-queue, execute_job."""
    db.reconcile()
    db.set_status([job.run_id], "pending", strict=True)
    # A rerun trains in new trial processes: none of this process's handles, whose pooled
    # connections still carry the fault's per-connection PRAGMA clamp (tests/support/dbfaults.py).
    orchestrator.run.trial.trial_db._HANDLES.clear()
    res = execute_job(job)
    assert res.status == "succeeded", res
    # resumed from the last checkpoint, whose points were all written before it existed
    assert last_stored - TRAIN["checkpoint_every"] < res.first_step <= last_stored + 1, res
    assert db.run(job.run_id).status == "succeeded"
    assert _assert_whole_steps(db, job.run_id, logged) == set(logged)
    assert max(logged) == TRAIN["steps"]
    assert "val/loss" in db.summaries(run_ids=[job.run_id])["name"].to_list()


def test_a_full_disk_fails_the_attempt_naming_the_db_and_rerun_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db, job, path = _setup(tmp_path)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE filler (b BLOB)")  # what the "disk" fills up with
    con.close()
    flag = tmp_path / "disk-full"
    logged: dict[int, set[str]] = {}
    _fault_reporter(monkeypatch, lambda: _fill_disk(path, flag), logged)

    with db_fault(flag):
        res = execute_job(job)

    assert res.status == "failed" and res.fault == "db_unavailable", res
    want = f"results DB {path} could not be written: database or disk is full"
    assert res.error is not None and want in res.error
    run, att = db.run(job.run_id), db.attempts(job.run_id)[-1]
    # the short end still fitted; db_unavailable leaves the run lost (resumable)
    assert run.status == "lost" and att.status == "failed"
    assert att.fault == "db_unavailable" and want in att.error
    steps = _assert_whole_steps(db, job.run_id, logged)
    # free space inside pages takes a few more steps (as on a real disk); then a write failed
    assert FAULT_AT_STEP in steps and max(steps) < TRAIN["steps"]

    flag.unlink()  # space is back
    _rerun_completes(db, job, logged, max(steps))


def test_a_read_only_db_leaves_the_run_to_go_lost_and_rerun_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
        ) -> None:
    db, job, path = _setup(tmp_path)
    flag = tmp_path / "read-only"
    logged: dict[int, set[str]] = {}
    _fault_reporter(monkeypatch, lambda: flag.write_text("readonly"), logged)

    with db_fault(flag):
        res = execute_job(job)

    want = f"results DB {path} could not be written: attempt to write a readonly database"
    assert res.status == "failed" and want in (res.error or ""), res
    assert "is not recorded: the run counts as running until its heartbeat goes stale" \
        in capfd.readouterr().err
    # nothing about the end could be written: the run is running, with a heartbeat that
    # stopped with the trial; the reconciler turns it lost after its own threshold
    assert db.run(job.run_id).status == "running"
    assert _assert_whole_steps(db, job.run_id, logged) == set(range(FAULT_AT_STEP + 1))
    flag.unlink()
    # lost once its heartbeat is stale (contract.states.stale_after_s), asked until then
    deadline = time.monotonic() + stale_after_s(job.heartbeat_s) + 30
    while not (ended := db.reconcile()):
        assert time.monotonic() < deadline and db.run(job.run_id).status == "running"
        time.sleep(0.1)
    assert ended == [job.run_id]
    assert db.run(job.run_id).status == "lost"
    _rerun_completes(db, job, logged, FAULT_AT_STEP)
