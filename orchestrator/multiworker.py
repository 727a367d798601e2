"""Multi-worker trials: a run with ``resources.workers > 1`` trains on a Ray Train worker group.

Ray Train V2 cannot be handed to a Tuner directly, so the Tune trial function *coordinates*:
it holds ``{CPU: 0.01}`` (orchestrator/cluster.py), builds a ``TorchTrainer`` whose
``ScalingConfig`` asks for ``workers`` bundles (``use_gpu`` when the run asks for GPUs) and
calls ``fit()``. Each worker calls ``trainer.train``; ``deepspeed.initialize`` reuses Train's
gloo/NCCL group, ZeRO shards across the workers, MoE experts split into ``ep_size`` groups.

- Rank 0 owns the DB: one attempt row per worker-group start (host = ``hostname/node id``),
  a ``workers`` artifact with every rank's node and pid, metrics via the DB reporter.
- Every rank saves its part of each DeepSpeed checkpoint into the run's checkpoint dir (a path
  all nodes reach), so a restarted group resumes from the last complete checkpoint.
- Failures: ``RunConfig(failure_config=FailureConfig(max_failures=retries))`` restarts the
  whole worker group after a worker or node dies; metric writes are upserts per (run, name,
  step), so the steps the new attempt re-trains replace, never duplicate, the old points.
  Before training, rank 0 decides go/no-go from the DB and broadcasts it: a run that was
  cancelled, or whose last failure is not worth retrying (orchestrator/faults.py), stops on
  every rank instead of training again.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

from orchestrator.env import float_env, prepare_trial_env
from orchestrator.faults import Fault, RetryPolicy, classify, describe

NOT_RETRIED = "not retried]"
TRAIN_DIR = "_train"  # Ray Train's own run state, under the sweep's storage


class _Abort(RuntimeError):
    """Raised on rank 0 to tear the worker group down (cancelled / not retried): the other
    ranks may be inside a collective and can only be stopped by Train."""


def _is_multi(job: dict[str, Any]) -> bool:
    return int(job["spec"].get("resources", {}).get("workers", 1)) > 1


def dispatch_trial(config: dict[str, Any]) -> None:
    """The Tune function trainable for every run: in-process for one worker (runner.py),
    a TorchTrainer for several. The scheduler's one-line hook."""
    if not _is_multi(config["job"]):
        from orchestrator.runner import run_trial

        run_trial(config)
        return
    run_multiworker_trial(config)


def trial_placement(job: dict[str, Any]) -> Any:
    """Tune's PlacementGroupFactory for ``job`` (the scheduler's resources hook)."""
    from ray.tune import PlacementGroupFactory

    from orchestrator.cluster import trial_bundles
    from trainer.config import Resources

    return PlacementGroupFactory(trial_bundles(Resources.model_validate(
        job["spec"].get("resources", {}))))


def run_multiworker_trial(config: dict[str, Any]) -> None:
    prepare_trial_env()
    from ray import tune

    job = config["job"]
    ctx = tune.get_context()
    storage = job.get("train_storage") or str(Path(job["checkpoint_dir"]).parent / TRAIN_DIR)
    result = fit_run(job, storage, retries=int(job.get("retries", 0)),
                     trial_id=ctx.get_trial_id(), in_tune=True)
    if result.get("status") != "succeeded":
        tune.report(result)  # success already reached Tune through TuneReportCallback


def fit_run(job: dict[str, Any], storage: str, retries: int = 0, trial_id: str | None = None,
            in_tune: bool = False) -> dict[str, Any]:
    """Train ``job`` on a Ray Train worker group (``ray.init`` must have run); returns rank 0's
    final result ({"status", "steps", ...}). Never raises for a training failure: the DB
    records it and the result says ``failed``."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig, TrainingFailedError
    from ray.train.torch import TorchTrainer

    from orchestrator.cluster import check_parallelism, live_nodes, scaling_kwargs
    from trainer.config import RunSpec

    spec = RunSpec.model_validate(job["spec"])
    check_parallelism(spec)
    gpus = sum(n.gpus for n in live_nodes())
    callbacks = []
    if in_tune:
        from ray.tune.integration.ray_train import TuneReportCallback

        callbacks.append(TuneReportCallback())
    trainer = TorchTrainer(
        worker_loop, train_loop_config={"job": job, "trial_id": trial_id, "retries": retries},
        scaling_config=ScalingConfig(**scaling_kwargs(spec.resources, gpus)),
        run_config=RunConfig(name=f"{job['name']}-{time.strftime('%Y%m%d-%H%M%S')}-"
                                  f"{os.getpid()}", storage_path=storage,
                             failure_config=FailureConfig(max_failures=retries),
                             callbacks=callbacks))
    try:
        trainer.fit()
    except TrainingFailedError as exc:
        return _record_group_failure(job, exc)
    return _final_result(job)


def _final_result(job: dict[str, Any]) -> dict[str, Any]:
    """The run's outcome as the DB has it (rank 0 wrote it; Train's Result may carry none)."""
    import results_db

    db = results_db.open(job["db_url"])
    try:
        row = db.run(int(job["run_id"]))
        attempts = db.attempts(int(job["run_id"]))
        return {"status": row.status if row else "failed", "attempts": len(attempts)}
    finally:
        db.close()


def _record_group_failure(job: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """Train gave up: close an attempt the dead workers left running, say why."""
    import results_db

    text = "".join(traceback.format_exception(exc))[-20000:]
    fault = classify(exc, text)
    db = results_db.open(job["db_url"])
    try:
        run_id = int(job["run_id"])
        attempts = db.attempts(run_id)
        if attempts and attempts[-1].status in ("running", "lost"):
            db.finish_attempt(attempts[-1].id, "failed",
                              error=f"worker group failed: {str(exc).splitlines()[0][:500]}"
                                    + describe(fault, False), traceback=text)
        row = db.run(run_id)
        return {"status": row.status if row else "failed", "fault": fault.value}
    finally:
        db.close()


# ---- inside every Ray Train worker ------------------------------------------------------------
def _launcher_env(ctx: Any) -> None:
    """DeepSpeed reads the launcher variables even when the process group exists."""
    os.environ["RANK"] = str(ctx.get_world_rank())
    os.environ["WORLD_SIZE"] = str(ctx.get_world_size())
    os.environ["LOCAL_RANK"] = str(ctx.get_local_rank())
    os.environ["LOCAL_WORLD_SIZE"] = str(ctx.get_local_world_size())
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if not _cuda() else "cuda")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def worker_loop(config: dict[str, Any]) -> None:
    """Ray Train's train_loop_per_worker: decide, train, report (every rank reports once)."""
    import ray.train
    import torch.distributed as tdist

    ctx = ray.train.get_context()
    _launcher_env(ctx)
    job, rank = config["job"], ctx.get_world_rank()
    decision = [_go_no_go(job) if rank == 0 else None]
    tdist.broadcast_object_list(decision, src=0)
    if decision[0] != "go":
        ray.train.report({"status": str(decision[0]), "steps": 0, "first_step": -1})
        return
    policy = RetryPolicy.from_env(int(config.get("retries", 0)))
    workers = _gather_workers()  # a collective: every rank, in the same order
    if rank == 0:
        result = _rank0_attempt(job, config.get("trial_id"), policy, workers)
    else:
        result = _other_rank(job, policy)
    ray.train.report(result)


def _go_no_go(job: dict[str, Any]) -> str:
    """'go', or the status the run keeps: cancelled, or failed with a non-retryable fault."""
    import results_db

    db = results_db.open(job["db_url"])
    try:
        row = db.run(int(job["run_id"]))
        if row is not None and row.status == "cancelled":
            return "cancelled"
        attempts = db.attempts(int(job["run_id"]))
        last = attempts[-1] if attempts else None
        if last is not None and last.status == "failed" and (last.error or "").endswith(
                NOT_RETRIED) and row is not None and row.status == "failed":
            return "failed"
        return "go"
    finally:
        db.close()


def _gather_workers() -> list[dict[str, Any]]:
    """Every rank's node, host and pid (rank order): the ``workers`` artifact."""
    import socket

    import ray
    import torch.distributed as tdist

    me = {"rank": tdist.get_rank(), "pid": os.getpid(), "host": socket.gethostname(),
          "node_id": ray.get_runtime_context().get_node_id()}
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, me)
    return out


def _rank0_attempt(job: dict[str, Any], trial_id: str | None, policy: RetryPolicy,
                   workers: list[dict[str, Any]]) -> dict[str, Any]:
    import results_db
    from orchestrator.cluster import host_label
    from orchestrator.reporter import DBReporter
    from orchestrator.runner import FLUSH_S_ENV, HEARTBEAT_S_ENV, _train_attempt

    db = results_db.open(job["db_url"])
    run_id = int(job["run_id"])
    attempt = db.start_attempt(run_id, host=host_label(), trial_id=trial_id)
    db.add_artifact(run_id, attempt.id, "workers", data={"workers": workers})
    reporter = DBReporter(db, run_id, attempt.id, heartbeat_s=float_env(HEARTBEAT_S_ENV, 5.0),
                          flush_s=float_env(FLUSH_S_ENV, 5.0))
    try:
        result = _train_attempt(db, job, run_id, attempt.id, reporter)
    except BaseException as exc:  # _train_attempt recorded it as failed
        fault = classify(exc, traceback.format_exc())
        retry = policy.should_retry(fault)
        _tag_error(db, attempt.id, fault, retry)
        if not retry and fault is Fault.CODE_ERROR:
            return {"status": "failed", "fault": fault.value}  # every rank fails alike
        raise _Abort(f"rank 0: {type(exc).__name__}: {exc}") from exc
    finally:
        db.close()
    if result["status"] == "cancelled":
        raise _Abort("run cancelled")  # the other ranks may wait in a collective: tear down
    return result


def _tag_error(db: Any, attempt_id: int, fault: Fault, retried: bool) -> None:
    from sqlalchemy import update

    from results_db.schema import Attempt

    with db.engine.begin() as conn:  # append the classification to the recorded error
        row = conn.execute(Attempt.__table__.select().where(Attempt.id == attempt_id)).first()
        if row is not None and row.error and "[" not in row.error[-40:]:
            conn.execute(update(Attempt).where(Attempt.id == attempt_id)
                         .values(error=row.error + describe(fault, retried)))


def _other_rank(job: dict[str, Any], policy: RetryPolicy) -> dict[str, Any]:
    from trainer import train
    from trainer.config import RunSpec
    from trainer.reporter import MemoryReporter

    spec = RunSpec.model_validate(job["spec"])
    try:
        res = train(spec, MemoryReporter(), Path(job["checkpoint_dir"]))  # reports nothing
    except BaseException as exc:
        fault = classify(exc, traceback.format_exc())
        if fault is Fault.CODE_ERROR and not policy.should_retry(fault):
            return {"status": "failed", "fault": fault.value}
        raise
    return {"status": res.status, "steps": res.steps}
