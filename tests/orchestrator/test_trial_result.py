"""The trial result is one frozen type (orchestrator/run/trial/trial_result.py): what Tune gets from
it, what the driver reads back, and the real runner path that builds a ``skipped`` one."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import results_db
from contract.config import RunSpec
from orchestrator.run.trial.runner import execute_job
from orchestrator.run.trial.trial_job import TrialJob
from orchestrator.run.trial.trial_result import STATUSES, TrialResult


def test_report_is_the_metrics_dict_tune_gets_without_unset_fields() -> None:
    res = TrialResult("failed", fault="oom", first_step=9, error="OutOfMemoryError: x")
    assert res.report() == {"status": "failed", "steps": -1, "first_step": 9, "fault": "oom",
                            "error": "OutOfMemoryError: x"}
    assert TrialResult("skipped", steps=0, holder="run 7 is running under submit 3f2a"
                       ).report() == {"status": "skipped", "steps": 0, "first_step": -1,
                                      "holder": "run 7 is running under submit 3f2a"}


def test_from_report_reads_back_what_report_wrote_and_ignores_tune_keys() -> None:
    res = TrialResult("succeeded", steps=48, first_step=1, pid=1234)
    metrics = {**res.report(), "training_iteration": 1, "time_total_s": 3.5, "trial_id": "a"}
    assert TrialResult.from_report(metrics) == res
    assert TrialResult.from_report({"training_iteration": 1}) is None  # died before reporting
    assert TrialResult.from_report(None) is None


def test_it_is_frozen_and_refuses_an_unknown_status() -> None:
    res = TrialResult("diverged", steps=30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.status = "succeeded"  # type: ignore[misc]
    with pytest.raises(ValueError, match="'finished' is not one of"):
        TrialResult("finished")  # type: ignore[arg-type]
    assert {"succeeded", "diverged", "failed", "cancelled", "skipped"} <= set(STATUSES)


def test_a_trial_whose_run_another_attempt_holds_reports_skipped_with_the_holder(
        tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    db = results_db.open(url)
    spec = RunSpec(name="held", sweep="tr", model={"preset": "tiny"},
                   train=dict(steps=2, batch_size=2, seq_len=16, warmup=1))
    run = db.register_runs(db.ensure_sweep("tr"), [results_db.NewRun(
        name="held", fingerprint=spec.fingerprint(), variant="baseline", seed=0,
        config=spec.model_dump(mode="json"))]).to_run[0]
    assert db.claim_run(run.id, "other-driver", "host-b") is not None
    job = TrialJob.of(run.id, "held", spec, tmp_path / "ckpt", url, db_wait_s=0)
    res = execute_job(job, trial_id="t1")
    assert isinstance(res, TrialResult)
    assert (res.status, res.steps, res.first_step) == ("skipped", 0, -1)
    assert res.holder == str(db.claim_refusal(run.id)) and "other-driver" in res.holder
    assert not (tmp_path / "ckpt").exists()  # nothing trained
    db.close()
