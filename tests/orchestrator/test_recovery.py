"""Recovery decisions without a cluster: what `rerun --sweep` takes and leaves (and why), the
driver's lease keeper recording its own silent attempts, and the typed TrialJob."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import results_db
from orchestrator.run.driver.rerun import sweep_rerun_plan
from orchestrator.run.driver.submit import make_plan
from orchestrator.run.health.leases import LeaseKeeper, node_fault
from orchestrator.run.trial.trial_job import TrialJob, driver_owner

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"


@pytest.fixture()
def db_ids(db_url: str) -> tuple[results_db.ResultsDB, list[int], str]:
    db = results_db.open(db_url)
    sid = db.ensure_sweep("rec")
    rows = db.register_runs(sid, [results_db.NewRun(
        name=f"r{i}", fingerprint=f"fp{i}", variant=f"v{i}", seed=0,
        config={"train": {"steps": 10}}) for i in range(5)]).to_run
    return db, [r.id for r in rows], "rec"


def test_rerun_sweep_takes_a_dead_drivers_queue_and_says_what_it_leaves(db_ids) -> None:
    db, ids, sweep = db_ids
    live_run, done, dead_queue, live_queue = ids[:4]
    others = ids[4:]
    db.claim_run(live_run, "submit aaaa on host x", "x/node")
    att = db.claim_run(done, "d", "h")
    db.finish_attempt(att.id, "succeeded")
    db.renew_leases([dead_queue], "submit dead on host y", lease_s=0.01)  # ran out
    db.renew_leases([live_queue] + others, "submit bbbb on host z", lease_s=60)
    time.sleep(0.05)
    plan = sweep_rerun_plan(db, sweep)
    assert plan.take == [dead_queue]
    why = dict(plan.left)
    assert why[live_run].startswith("running under submit aaaa on host x, last heartbeat")
    assert why[done] == "succeeded: a result (rerun it by id to redo it)"
    assert why[live_queue].startswith("pending, queued by submit bbbb on host z (alive")
    # a lost run is taken by default, a failed one too
    db.reconcile(stale_after_s=0)
    assert live_run in sweep_rerun_plan(db, sweep).take


def test_rerun_sweep_cli_prints_what_it_leaves_and_trains_nothing_when_all_is_live_or_done(
        db_ids, db_url: str) -> None:
    from tests.support import cliproc

    db, ids, sweep = db_ids
    att = db.claim_run(ids[0], "d", "h")
    db.finish_attempt(att.id, "succeeded")
    db.renew_leases(ids[1:], "submit bbbb on host z", lease_s=120)  # a live driver's queue
    # a process of its own, as `python -m orchestrator` (forked from one that imported the CLI)
    out = cliproc.run("rerun", "--sweep", sweep, "--db", db_url, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"left run {ids[0]} alone: succeeded: a result" in out.stdout
    assert f"left run {ids[1]} alone: pending, queued by submit bbbb on host z" in out.stdout
    assert "nothing to rerun in sweep rec" in out.stdout
    assert [db.run(i).status for i in ids] == ["succeeded"] + ["pending"] * 4


def test_lease_keeper_records_its_own_silent_attempts(db_ids, monkeypatch) -> None:
    db, ids, _ = db_ids
    # No Ray here, even when another module of this test process started one (xdist worker):
    # the host's node id then names no live node and would read as node_lost.
    import ray
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    me, other = "submit me on h", "submit other on h"
    mine = db.claim_run(ids[0], me, "h/deadbeef0000", heartbeat_s=0.05)
    theirs = db.claim_run(ids[1], other, "h", heartbeat_s=0.05)
    said: list[str] = []
    keeper = LeaseKeeper(db, ids[:3], me, heartbeat_s=0.05, say=said.append)
    time.sleep(2.3)  # 3 x 0.05 + 2 s
    assert keeper.tick() == [mine.id]
    att = db.attempts(ids[0])[0]
    assert (att.status, att.fault) == ("failed", "worker_died")  # no Ray here: not node_lost
    assert db.run(ids[0]).status == "failed"
    assert db.attempts(ids[1])[0].status == "running" and theirs is not None  # not ours
    assert said and said[0].startswith(f"run {ids[0]}: attempt 1 worker died: no heartbeat")
    row = db.run(ids[2])
    assert row.owner == me and row.lease_until is not None
    with keeper:
        pass  # enter renews, exit releases
    assert db.run(ids[2]).lease_until is None
    assert node_fault("plainhost") == "worker_died"


def test_trial_job_is_validated_once_and_frozen(tmp_path: Path) -> None:
    plan = make_plan(SMOKE)
    spec = plan.runs[0].spec
    job = TrialJob.of(7, "r", spec.model_dump(mode="json"), tmp_path / "c", "sqlite:///x.db")
    assert job.spec == spec and job.checkpoint_dir.is_absolute()
    assert (job.cpus, job.workers, job.is_multiworker) == (spec.resources.cpus, 1, False)
    with pytest.raises(AttributeError):
        job.run_id = 8  # type: ignore[misc]
    with pytest.raises(TypeError, match="spec must be a RunSpec"):
        TrialJob(run_id=1, name="r", spec={"name": "r"}, checkpoint_dir=tmp_path,  # type: ignore
                 db_url="sqlite:///x.db")
    with pytest.raises(ValueError, match="retries >= 0"):
        TrialJob.of(1, "r", spec, tmp_path, "sqlite:///x.db", retries=-1)
    owner = driver_owner()
    assert owner.startswith("submit ") and " on host " in owner


def test_sigterm_becomes_a_stop_request_in_the_main_thread() -> None:
    import os
    import signal

    from orchestrator.run.trial.sigterm import graceful_sigterm

    asked: list[str] = []
    before = signal.getsignal(signal.SIGTERM)
    with graceful_sigterm(asked.append) as hooked:
        assert hooked
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs at the next bytecode of the main thread
    assert asked == ["SIGTERM"]
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_in_a_ray_trial_thread_stops_instead_of_exiting() -> None:
    """In a Ray worker, Ray's own main-thread handler calls this function to exit: while a
    trial trains it asks for a stop instead; the second SIGTERM exits as before."""
    import threading

    import ray._private.worker as ray_worker

    from orchestrator.run.trial.sigterm import graceful_sigterm

    asked: list[str] = []
    out: dict[str, object] = {}
    original = ray_worker.raise_sys_exit_with_custom_error_message

    def trial() -> None:
        with graceful_sigterm(asked.append) as hooked:
            out["hooked"] = hooked
            ray_worker.raise_sys_exit_with_custom_error_message("SIGTERM", exit_code=1)
            try:
                ray_worker.raise_sys_exit_with_custom_error_message("SIGTERM", exit_code=1)
            except SystemExit as exc:
                out["second"] = exc.code

    th = threading.Thread(target=trial)
    th.start()
    th.join(timeout=10)
    assert out == {"hooked": True, "second": 1} and asked == ["SIGTERM"]
    assert ray_worker.raise_sys_exit_with_custom_error_message is original
