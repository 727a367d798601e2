"""The Tune trial function: one run = one attempt row, trained in the trial process.

DB and Tune agree on failures: an exception is recorded (failed + traceback) and re-raised,
so Tune's FailureConfig retries it (each retry is a new attempt that resumes from the run's
checkpoint dir). Divergence is a result, not an error. A cancelled run ends quietly (no
retry). Imports of torch/deepspeed happen here, after the environment is prepared.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

from orchestrator.env import float_env, prepare_trial_env

HEARTBEAT_S_ENV = "GATESWEEP_HEARTBEAT_S"
FLUSH_S_ENV = "GATESWEEP_FLUSH_S"


def job_config(run_id: int, name: str, spec_json: dict[str, Any], db_url: str,
               checkpoint_dir: Path) -> dict[str, Any]:
    """What one trial needs; JSON-able so it survives Ray's serialisation and Tune's state."""
    return {"run_id": run_id, "name": name, "spec": spec_json, "db_url": db_url,
            "checkpoint_dir": str(checkpoint_dir.resolve())}


def run_trial(config: dict[str, Any]) -> None:
    """Tune function trainable: config = {"job": job_config(...)}."""
    prepare_trial_env()
    from ray import tune

    job = config["job"]
    ctx = tune.get_context()
    result = execute_job(job, trial_id=ctx.get_trial_id())
    tune.report(result)


def execute_job(job: dict[str, Any], trial_id: str | None = None) -> dict[str, Any]:
    """Run one attempt of ``job`` and record it; returns {"status", "steps", "first_step"}."""
    import results_db
    from orchestrator.reporter import DBReporter

    db = results_db.open(job["db_url"])
    run_id = int(job["run_id"])
    row = db.run(run_id)
    if row is not None and row.status == "cancelled":  # cancelled while it was queued
        return {"status": "cancelled", "steps": 0, "first_step": -1}
    from orchestrator.cluster import host_label

    attempt = db.start_attempt(run_id, host=host_label(), trial_id=trial_id)
    # trainer.train flushes it before every checkpoint: a killed attempt leaves no hole
    reporter = DBReporter(db, run_id, attempt.id, heartbeat_s=float_env(HEARTBEAT_S_ENV, 5.0),
                          flush_s=float_env(FLUSH_S_ENV, 5.0))
    try:
        return _train_attempt(db, job, run_id, attempt.id, reporter)
    finally:
        db.close()  # a reused trial actor must not accumulate engines


def _train_attempt(db: Any, job: dict[str, Any], run_id: int, attempt_id: int,
                   reporter: Any) -> dict[str, Any]:
    from orchestrator.reporter import RunCancelled
    from trainer import train
    from trainer.config import RunSpec

    ckpt = Path(job["checkpoint_dir"])
    try:
        spec = RunSpec.model_validate(job["spec"])
        ckpt.mkdir(parents=True, exist_ok=True)
        db.add_artifact(run_id, attempt_id, "checkpoint_dir", path=str(ckpt))
        res = train(spec, reporter, ckpt)
    except RunCancelled:
        reporter.close()
        db.finish_attempt(attempt_id, "cancelled", error="cancelled by the user")
        return {"status": "cancelled", "steps": -1, "first_step": reporter.first_step or -1}
    except BaseException as exc:
        from orchestrator.faults import RetryPolicy, classify, describe

        reporter.close()
        tb = traceback.format_exc()
        fault = classify(exc, tb)
        retry = RetryPolicy.from_env(int(job.get("retries", 0))).should_retry(fault)
        db.finish_attempt(attempt_id, "failed", error=f"{type(exc).__name__}: {exc}"
                          + describe(fault, retry), traceback=tb)
        if not retry and not isinstance(exc, KeyboardInterrupt):
            return {"status": "failed", "steps": -1, "fault": fault.value,
                    "first_step": reporter.first_step or -1}
        raise
    reporter.close()
    db.finish_attempt(attempt_id, res.status)
    return {"status": res.status, "steps": res.steps,
            "first_step": -1 if reporter.first_step is None else reporter.first_step,
            "pid": os.getpid()}
