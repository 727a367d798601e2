"""Multi-worker trials (orchestrator/run/trial/multiworker.py): real Ray Train workers, DeepSpeed
ZeRO-2 over gloo, a real SQLite results DB. Slow: a TorchTrainer start costs ~30 s here."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import results_db
from contract.config import RunSpec
from orchestrator.run.trial.multiworker import fit_run
from orchestrator.run.trial.trial_job import TrialJob

# The Ray fixtures (tests/cluster_fixtures.py), until tests/conftest.py registers the plugin.

BASE: dict[str, Any] = {
    "name": "mw", "sweep": "mw", "seed": 3, "model": {"preset": "tiny"},
    "train": {"steps": 12, "batch_size": 4, "seq_len": 32, "warmup": 2, "lr": 3e-3,
              "zero_stage": 2, "eval_every": 0, "eval_batches": 1, "log_every": 1,
              "checkpoint_every": 0},
    "eval": {"probes": ["attention_sink"]},
    "resources": {"cpus": 1, "workers": 2},
}


def _spec(**train: Any) -> dict[str, Any]:
    doc = {**BASE, "train": {**BASE["train"], **train}}
    return RunSpec.model_validate(doc).model_dump(mode="json")


def _register(url: str, spec: dict[str, Any]) -> int:
    db = results_db.open(url)
    sweep = db.ensure_sweep("mw")
    run = RunSpec.model_validate(spec)
    res = db.register_runs(sweep, [results_db.NewRun(name=run.name, fingerprint=run.fingerprint(),
                                                      variant="base", seed=run.seed,
                                                      config=spec)])
    return res.to_run[0].id


def _job(run_id: int, name: str, spec: dict[str, Any], url: str, ckpt: Path) -> TrialJob:
    """A 1 s heartbeat and flush, as every e2e driver here sets (GATESWEEP_HEARTBEAT_S /
    _FLUSH_S): the first points and a cancel reach the DB / rank 0 within a second, not the
    default five."""
    return TrialJob.of(run_id, name, spec, ckpt, url, owner="test driver", heartbeat_s=1.0,
                       flush_s=1.0)


def _loss_by_step(db: Any, run_id: int) -> dict[int, float]:
    m = db.metrics(run_ids=[run_id], names=["train/loss"])
    return dict(zip(m["step"].to_list(), m["value"].to_list()))


@pytest.mark.slow
def test_killed_worker_resumes_from_checkpoint_without_metric_holes(ray_local: str,
                                                                    tmp_path: Path) -> None:
    """SIGKILL rank 1 after the first checkpoint: Train restarts the group (max_failures=1),
    attempt 2 resumes from the checkpoint, and every step's point exists exactly once."""
    # The kill lands within a checkpoint or two of step 10 (the poll sees each checkpoint as
    # it is recorded); 100 steps leave ~80 in flight. With 300, the resumed attempt spent ~8 s
    # more writing 20 more checkpoints.
    steps = 100
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = _spec(steps=steps, checkpoint_every=10, warmup=5)
    run_id = _register(url, spec)
    job = _job(run_id, "mw-kill", spec, url, tmp_path / "ckpt")
    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.update(
        fit_run(job, str(tmp_path / "_train"), retries=1).report()), daemon=True)
    th.start()
    victim = _wait_for_checkpoint_then_rank1_pid(url, run_id, th)
    os.kill(victim, signal.SIGKILL)
    th.join(timeout=400)
    assert not th.is_alive(), "fit did not finish"
    assert out.get("status") == "succeeded", out

    db = results_db.open(url)
    assert db.run(run_id).status == "succeeded"
    attempts = db.attempts(run_id)
    assert len(attempts) == 2 and attempts[0].status == "failed"
    assert attempts[0].fault == "worker_died"  # the same trial's restarted group took over
    assert attempts[1].status == "succeeded"
    summ = db.summaries(run_ids=[run_id], names=["train/resumed_from_step"])
    resumed = int(summ["value"][0])
    assert resumed >= 10 and resumed % 10 == 0
    counts = db.query(f"SELECT step, COUNT(*) AS n, MIN(attempt_id) AS a FROM metrics "
                      f"WHERE run_id = {run_id} AND name = 'train/loss' GROUP BY step")
    assert counts["step"].to_list() == list(range(1, steps + 1))  # none missing
    assert set(counts["n"].to_list()) == {1}  # none duplicated
    by_attempt = dict(zip(counts["step"].to_list(), counts["a"].to_list()))
    assert by_attempt[steps] == attempts[1].id  # the end came from the resumed attempt
    assert by_attempt[1] == attempts[0].id  # the start was kept from the first one


@pytest.mark.slow
def test_code_error_is_not_retried(ray_local: str, tmp_path: Path) -> None:
    """A missing data file fails the same way on every rank: one attempt, `failed`, tagged
    `[code_error; not retried]`, although the policy allows 2 retries for transient faults."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = RunSpec.model_validate({**_spec(), "data": {"source": "text",
                                                      "path": str(tmp_path / "missing.txt")}})
    doc = spec.model_dump(mode="json")
    run_id = _register(url, doc)
    t0 = time.monotonic()
    result = fit_run(_job(run_id, "mw-bad", doc, url, tmp_path / "ckpt"),
                     str(tmp_path / "_train"), retries=2)
    assert result.status == "failed", result
    db = results_db.open(url)
    attempts = db.attempts(run_id)
    assert [a.status for a in attempts] == ["failed"]
    assert "missing.txt" in attempts[0].error
    assert attempts[0].error.endswith("[code_error; not retried]")
    assert time.monotonic() - t0 < 120  # no worker-group restarts


@pytest.mark.slow
def test_cancel_stops_every_rank(ray_local: str, tmp_path: Path) -> None:
    """`orchestrator cancel` reaches rank 0 through its heartbeat; the group is torn down (the
    other rank may sit in a collective) and the restarted group's go/no-go stops at once."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = _spec(steps=5000, log_every=5)
    run_id = _register(url, spec)
    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.update(fit_run(
        _job(run_id, "mw-cancel", spec, url, tmp_path / "ckpt"),
        str(tmp_path / "_train"), retries=1).report()), daemon=True)
    th.start()
    db = results_db.open(url)
    deadline = time.monotonic() + 240
    while db.metrics(run_ids=[run_id]).height == 0:
        assert th.is_alive() and time.monotonic() < deadline, "never started training"
        time.sleep(0.2)
    assert db.set_status([run_id], "cancelled") == [run_id]
    th.join(timeout=240)
    assert not th.is_alive(), "a rank kept training after the cancel"
    assert out["status"] == "cancelled"
    assert db.run(run_id).status == "cancelled"
    assert [a.status for a in db.attempts(run_id)] == ["cancelled"]  # no new attempt
    assert db.metrics(run_ids=[run_id])["step"].max() < 5000


def _wait_for_checkpoint_then_rank1_pid(url: str, run_id: int, th: threading.Thread) -> int:
    deadline = time.monotonic() + 300
    db = results_db.open(url)
    while time.monotonic() < deadline:
        assert th.is_alive(), "fit ended before the worker could be killed"
        arts = db.artifacts(run_id)
        if arts.height:
            kinds = arts["kind"].to_list()
            if "checkpoint" in kinds and "workers" in kinds:
                doc = json.loads(arts.filter(arts["kind"] == "workers")["data"].to_list()[0])
                return int(doc["workers"][1]["pid"])
        time.sleep(0.1)
    raise AssertionError("no checkpoint within 300 s")


SWEEP = """\
name: mw-cli
base:
  model: {preset: tiny}
  train: {steps: 12, batch_size: 4, seq_len: 32, warmup: 2, lr: 3.0e-3, zero_stage: 2,
          eval_every: 0, eval_batches: 1, log_every: 1, checkpoint_every: 0}
  eval: {probes: [attention_sink]}
variants:
  two_workers: {}
  one_worker: {resources.workers: 1, train.grad_accum: 2}
seeds: [0]
resources: {cpus: 0.5, workers: 2}
"""


@pytest.mark.slow
def test_submit_runs_multiworker_and_single_worker_runs_side_by_side(ray_local: str,
                                                                      tmp_path: Path) -> None:
    """`orchestrator submit`: the 2-worker run goes through Ray Train (a `workers` artifact
    with ranks 0 and 1 in two processes), the 1-worker run stays in its trial process; both
    succeed. And they train alike: 2 workers x batch 4 (ZeRO-2, gloo) == 1 worker x batch 4 x
    grad_accum 2 draw the same samples (trainer/data.py indexes them by
    (step*accum+micro)*world+rank) for the same mean gradient, so the loss curves agree up to
    float summation order. The submit joins the module's local cluster (`--address`): a
    submit that starts its own local Ray is tests/e2e/test_orchestrator_e2e.py's subject."""
    import subprocess
    import sys

    spec = tmp_path / "mw.yaml"
    spec.write_text(SWEEP)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    env = {**os.environ, "GATESWEEP_HEARTBEAT_S": "1", "GATESWEEP_FLUSH_S": "1"}
    env.pop("RAY_ADDRESS", None)
    res = subprocess.run([sys.executable, "-m", "orchestrator", "submit", str(spec), "--db", url,
                          "--storage", str(tmp_path / "runs"), "--address", ray_local], env=env,
                         capture_output=True, text=True, timeout=400)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    db = results_db.open(url)
    two, one = db.run("two_workers-s0"), db.run("one_worker-s0")
    assert two.status == one.status == "succeeded"
    arts = db.artifacts(two.id)
    doc = json.loads(arts.filter(arts["kind"] == "workers")["data"].to_list()[0])
    assert [w["rank"] for w in doc["workers"]] == [0, 1]
    assert len({w["pid"] for w in doc["workers"]}) == 2
    assert "workers" not in db.artifacts(one.id)["kind"].to_list()

    multi, single = _loss_by_step(db, two.id), _loss_by_step(db, one.id)
    assert sorted(multi) == list(range(1, 13)) == sorted(single)
    for step in multi:
        assert multi[step] == pytest.approx(single[step], rel=2e-3, abs=1e-4), step
    assert multi[12] < multi[1] - 0.2  # it trained (the comparison is not of two flat lines)
