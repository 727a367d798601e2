"""Provenance recorded on a real run: the Tune trial's body (``execute_job``: claim, the real
trainer, the DB reporter) trains a tiny run into a real SQLite file, and the attempt's row in
``provenance`` holds what importlib.metadata, git and the engine say."""

from __future__ import annotations

import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path

import results_db
from contract.config import RunSpec
from contract.provenance import SOURCE_ROOT
from orchestrator.run.trial.runner import execute_job
from orchestrator.run.trial.trial_job import TrialJob


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(SOURCE_ROOT), *args], capture_output=True,
                          check=True).stdout


def test_a_real_attempt_records_code_packages_device_and_deepspeed_config(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    db = results_db.open(url)
    spec = RunSpec(name="prov", sweep="pv", model={"preset": "tiny"},
                   train=dict(steps=2, batch_size=2, seq_len=16, warmup=1, eval_every=0,
                              checkpoint_every=0))
    run = db.register_runs(db.ensure_sweep("pv"), [results_db.NewRun(
        name="prov", fingerprint=spec.fingerprint(), variant="baseline", seed=0,
        config=spec.model_dump(mode="json"))]).to_run[0]
    head_before = _git("rev-parse", "HEAD").decode().strip()
    res = execute_job(TrialJob.of(run.id, "prov", spec, tmp_path / "ckpt", url, db_wait_s=0))
    assert res.status == "succeeded"
    diff = _git("diff", "HEAD", "--no-ext-diff", "--no-color", "--binary")
    head_after = _git("rev-parse", "HEAD").decode().strip()

    prov = db.provenance(run_ids=[run.id])
    assert prov.height == 1  # once per attempt, not per step
    row = prov.row(0, named=True)
    assert (row["run_id"], row["attempt"], row["sweep"]) == (run.id, 1, "pv")
    assert row["source"] == "git" and row["git_commit"] in (head_before, head_after)
    assert row["dirty"] is bool(diff)
    if diff and row["git_commit"] == head_after:  # the tree did not move meanwhile
        assert row["diff_sha256"] == hashlib.sha256(diff).hexdigest()
    for name in ("gatesweep", "torch", "deepspeed", "ray", "polars", "sqlalchemy"):
        assert row[name] == metadata.version(name), name
    import platform

    assert row["python"] == platform.python_version()
    assert (row["accelerator"], row["device_model"], row["device_count"]) == ("cpu", None, 0)
    assert row["cpu_threads"] >= 1 and row["world_size"] == 1 and row["cpu_model"]
    ds = json.loads(row["deepspeed_config"])
    assert ds["train_micro_batch_size_per_gpu"] == 2 and ds["zero_optimization"]["stage"] == 0
    # the same row through SQL, as `orchestrator query` runs it
    sql = db.query("select p.git_commit, p.torch, r.name from provenance p join runs r "
                   "on r.id = p.run_id")
    assert sql.rows() == [(row["git_commit"], metadata.version("torch"), "prov")]
    db.close()
