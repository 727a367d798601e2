"""The DB-backed Reporter against a real SQLite file: batching, heartbeat thread, cancel."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import results_db
from orchestrator.run.driver.submit import make_plan, register
from orchestrator.run.trial.reporter import DBReporter, RunCancelled, Superseded, SweepStopped
from tests.support.silence import silence

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"


@pytest.fixture()
def started(tmp_path: Path) -> tuple[results_db.ResultsDB, int, int]:
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    run = register(db, make_plan(SMOKE), force=False).to_run[0]
    att = db.start_attempt(run.id, host="test")
    return db, run.id, att.id


def n_points(db: results_db.ResultsDB, run_id: int) -> int:
    return db.metrics(run_ids=[run_id]).height


def test_points_are_batched_and_flushed_at_close(started: tuple) -> None:
    db, run_id, att = started
    rep = DBReporter(db, run_id, att, flush_points=6, flush_s=3600, heartbeat_s=3600)
    rep.log(1, {"train/loss": 3.0, "train/lr": 1e-3})
    rep.log(2, {"train/loss": 2.9, "train/lr": 1e-3})
    assert n_points(db, run_id) == 0  # buffered
    rep.log(3, {"train/loss": 2.8, "train/lr": 1e-3})  # 6 points: flush
    assert n_points(db, run_id) == 6
    rep.log(4, {"train/loss": 2.7})
    rep.summary({"val/ppl": 9.5})
    rep.artifact("gate_histogram", {"bins": [0, 1], "counts": [3]})
    rep.artifact("checkpoint", "/x/ckpt")
    rep.close()
    assert n_points(db, run_id) == 7 and rep.first_step == 1
    summ = db.summaries(run_ids=[run_id])
    assert summ.filter(summ["name"] == "val/ppl")["value"][0] == 9.5
    arts = db.artifacts(run_id)
    assert sorted(arts["kind"].to_list()) == ["checkpoint", "gate_histogram"]


def test_heartbeat_thread_keeps_the_attempt_fresh(started: tuple) -> None:
    db, run_id, att = started
    before = db.attempts(run_id)[-1].heartbeat
    rep = DBReporter(db, run_id, att, heartbeat_s=0.1)
    time.sleep(0.6)
    after = db.attempts(run_id)[-1].heartbeat
    rep.close()
    assert after > before
    assert db.reconcile(stale_after_s=30) == []  # fresh: not lost


def test_cancel_in_the_db_surfaces_as_run_cancelled(started: tuple) -> None:
    db, run_id, att = started
    rep = DBReporter(db, run_id, att, heartbeat_s=0.1)
    rep.heartbeat()  # not cancelled yet: no error
    db.set_status([run_id], "cancelled")
    deadline = time.monotonic() + 5
    while not rep.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(RunCancelled):
        rep.heartbeat()
    with pytest.raises(RunCancelled):
        rep.log(5, {"train/loss": 1.0})
    rep.close()


def test_a_superseded_attempt_is_told_to_stop_and_writes_nothing(tmp_path: Path) -> None:
    """Another attempt took the run over (lease ran out): heartbeat() returns False -- the
    trainer's cue to stop -- and the old attempt's buffered points are dropped instead of
    overwriting the new holder's: its flush raises Superseded (so the trainer, which flushes
    before every checkpoint, never saves one past its last written step)."""
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    run = register(db, make_plan(SMOKE), force=False).to_run[0]
    old = db.claim_run(run.id, "driver A", "h", heartbeat_s=0.1)
    silence(db, old.id, 2.5)  # stale: 3 x 0.1 s + 2 s
    new = db.claim_run(run.id, "driver B", "h")
    assert new is not None
    rep = DBReporter(db, run.id, old.id, heartbeat_s=0.05, flush_s=3600)
    assert rep.heartbeat() is True  # the thread has not asked yet
    rep.log(7, {"train/loss": 9.9})
    deadline = time.monotonic() + 5
    while not rep.superseded and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rep.heartbeat() is False
    with pytest.raises(Superseded, match="no longer the run's current one"):
        rep.flush()
    with pytest.raises(Superseded):
        rep.artifact("checkpoint", "/x/ckpt")
    with pytest.raises(Superseded):
        rep.close()
    assert n_points(db, run.id) == 0 and db.artifacts(run.id).height == 0
    assert db.heartbeat(new.id) is True


def test_a_woken_attempt_asks_the_db_before_it_writes(tmp_path: Path) -> None:
    """A worker stalled by SIGSTOP, its driver recorded it dead: the first flush
    after it wakes -- before its heartbeat thread has said anything -- asks the DB, writes
    nothing and raises Superseded."""
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    run = register(db, make_plan(SMOKE), force=False).to_run[0]
    att = db.claim_run(run.id, "driver A", "h")
    rep = DBReporter(db, run.id, att.id, heartbeat_s=3600, flush_s=3600)
    rep.log(10, {"train/loss": 2.0})
    rep.flush()
    db.finish_attempt(att.id, "failed", error="worker died: no heartbeat", fault="worker_died")
    rep.log(20, {"train/loss": 1.0})
    assert not rep.superseded  # the thread has not beaten since
    with pytest.raises(Superseded):
        rep.flush()
    assert rep.superseded and rep.heartbeat() is False
    assert db.metrics(run_ids=[run.id])["step"].to_list() == [10]
    with pytest.raises(Superseded):
        rep.close()


def test_a_db_outage_is_waited_out_then_the_points_are_written(tmp_path: Path) -> None:
    """The DB refuses writes for ~1.5 s (an injected DBUnavailable, test-side): flush waits
    (backoff) instead of failing, then writes every point; past db_wait_s it raises."""
    from orchestrator.run.health.dbretry import DBOutage

    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    run = register(db, make_plan(SMOKE), force=False).to_run[0]
    att = db.claim_run(run.id, "driver A", "h")
    down = _Outage(db, seconds=1.5)
    rep = DBReporter(down, run.id, att.id, heartbeat_s=3600, flush_s=3600, db_wait_s=30)
    rep.log(1, {"train/loss": 3.0})
    t0 = time.monotonic()
    rep.flush()
    assert 1.4 < time.monotonic() - t0 < 10 and down.refused >= 2
    assert db.metrics(run_ids=[run.id])["step"].to_list() == [1]
    short = DBReporter(_Outage(db, seconds=60), run.id, att.id, heartbeat_s=3600,
                       flush_s=3600, db_wait_s=1.0)
    short.log(2, {"train/loss": 2.0})
    with pytest.raises(DBOutage, match="could not be written.*limit is 1 s"):
        short.flush()
    assert db.metrics(run_ids=[run.id])["step"].to_list() == [1]


def test_a_flush_waiting_when_the_driver_stops_the_sweep_writes_nothing(
        tmp_path: Path) -> None:
    """The DB is down for 1.5 s; the driver stops the sweep 0.5 s in (its flag set, as in the
    cluster's key-value store). The flush that waited writes nothing once the DB is back, later
    flushes neither, and the heartbeat thread asks the trainer to stop."""
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    run = register(db, make_plan(SMOKE), force=False).to_run[0]
    att = db.claim_run(run.id, "driver A", "h")
    t0 = time.monotonic()

    def flag() -> str | None:
        return "results DB unusable" if time.monotonic() - t0 > 0.5 else None

    rep = DBReporter(_Outage(db, seconds=1.5), run.id, att.id, heartbeat_s=0.2, flush_s=3600,
                     db_wait_s=30, sweep_stopped=flag)
    rep.log(1, {"train/loss": 3.0})
    with pytest.raises(SweepStopped, match="its driver stopped the sweep"):
        rep.flush()
    assert time.monotonic() - t0 < 10
    rep.log(2, {"train/loss": 2.0})
    with pytest.raises(SweepStopped):
        rep.close()
    assert not rep.heartbeat() and "stopped the sweep" in rep.stop_reason
    assert db.metrics(run_ids=[run.id]).height == 0
    assert db.attempts(run.id)[-1].status == "running"  # its end is the driver's to record


class _Outage:
    """Test-side injector: the real DB behind it, but every call raises DBUnavailable for
    the first ``seconds`` (a server restart / a full disk, from the caller's side)."""

    def __init__(self, db: results_db.ResultsDB, seconds: float) -> None:
        self.db, self.until, self.refused = db, time.monotonic() + seconds, 0

    def __getattr__(self, name: str):
        real = getattr(self.db, name)

        def call(*args, **kwargs):
            if time.monotonic() < self.until:
                self.refused += 1
                raise results_db.DBUnavailable("results DB r.db could not be written: "
                                               "database or disk is full")
            return real(*args, **kwargs)
        return call


def test_the_last_flush_writes_points_artifacts_provenance_and_the_end_in_one_transaction(
        started: tuple) -> None:
    """A 2-step trial wrote in 8 transactions (claim, 3 artifacts, 2 flushes, the final
    checkpoint's row, the end); artifacts now ride on the next flush and close(end=...) ends
    the attempt in the same transaction as its last points."""
    from sqlalchemy import event

    from contract.states import RunStatus

    db, run_id, att = started
    rep = DBReporter(db, run_id, att, flush_s=3600, heartbeat_s=3600)
    rep.artifact("data", {"sha256": "ab"})
    rep.artifact("checkpoint", "/x/ckpt")
    assert db.artifacts(run_id).height == 0  # buffered until the flush
    rep.log(1, {"train/loss": 3.0})
    rep.summary({"val/ppl": 9.5})
    txs: list[object] = []

    def begin(conn: object) -> None:
        txs.append(conn)

    event.listen(db.engine, "begin", begin)
    try:
        assert rep.close(end=RunStatus.SUCCEEDED) is True
    finally:
        event.remove(db.engine, "begin", begin)
    assert len(txs) == 1
    (a,) = db.attempts(run_id)
    assert (a.status, db.run(run_id).status) == ("succeeded", "succeeded")
    assert n_points(db, run_id) == 1
    assert sorted(db.artifacts(run_id)["kind"].to_list()) == ["checkpoint", "data"]
    assert db.summaries(run_ids=[run_id])["name"].to_list() == ["val/ppl"]


def test_an_artifact_is_written_by_the_heartbeat_thread_within_one_interval(
        started: tuple) -> None:
    """No flush comes (a long first step, a slow DeepSpeed start): the heartbeat thread
    writes the buffered artifacts and provenance within one interval, so an attempt killed
    then still has them."""
    from contract.provenance import ARTIFACT as PROVENANCE
    from tests.support.report_db import provenance

    db, run_id, att = started
    rep = DBReporter(db, run_id, att, flush_s=3600, heartbeat_s=0.1)
    rep.artifact("checkpoint_dir", "/x/run")
    rep.artifact(PROVENANCE, provenance())
    deadline = time.monotonic() + 5  # a beat may come between the two calls: wait for both
    while (db.artifacts(run_id).height == 0 or db.provenance([run_id]).height == 0) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    assert db.artifacts(run_id)["kind"].to_list() == ["checkpoint_dir"]
    assert db.provenance([run_id])["attempt_id"].to_list() == [att]
    rep.close()
    assert db.artifacts(run_id).height == 1  # written once


def test_a_run_cancelled_before_the_last_flush_keeps_its_points_but_is_not_ended(
        started: tuple) -> None:
    """close(end=...) on a run the user cancelled meanwhile: the attempt's last points are
    still written (they are its own), the end is not (False: the caller ends the attempt),
    and the run stays cancelled."""
    from contract.states import RunStatus

    db, run_id, att = started
    rep = DBReporter(db, run_id, att, flush_s=3600, heartbeat_s=3600)
    rep.log(1, {"train/loss": 3.0})
    rep.artifact("checkpoint", "/x/ckpt")
    db.set_status([run_id], "cancelled")
    assert rep.close(end=RunStatus.SUCCEEDED) is False
    assert n_points(db, run_id) == 1 and db.artifacts(run_id).height == 1
    assert db.run(run_id).status == "cancelled"


def test_a_checkpoints_row_is_written_at_the_trainers_next_liveness_call(
        started: tuple) -> None:
    """The trainer saves, records the checkpoint, then calls heartbeat(): the row is in the
    DB when that call returns, so an attempt stopped or killed right after its save keeps
    the record of the checkpoint its retry resumes from."""
    from contract.reporter import CHECKPOINT

    db, run_id, att = started
    rep = DBReporter(db, run_id, att, flush_s=3600, heartbeat_s=3600)
    rep.artifact(CHECKPOINT, "/x/ckpt/global_step8")
    assert db.artifacts(run_id).height == 0
    assert rep.heartbeat() is True
    assert db.artifacts(run_id)["path"].to_list() == ["/x/ckpt/global_step8"]
    assert rep.heartbeat() is True  # nothing pending: no write
    rep.close()
    assert db.artifacts(run_id).height == 1
