"""Multi-worker trials: a run with ``resources.workers > 1`` trains on a Ray Train worker group.

Ray Train V2 cannot be handed to a Tuner directly, so the Tune trial function *coordinates*:
it holds ``{CPU: 0.01}`` (orchestrator/run/cluster.py), builds a ``TorchTrainer`` whose
``ScalingConfig`` asks for ``workers`` bundles (``use_gpu`` when the run asks for GPUs) and
calls ``fit()``. Each worker calls ``trainer.train``; ``deepspeed.initialize`` reuses Train's
gloo/NCCL group, ZeRO shards across the workers, MoE experts split into ``ep_size`` groups.

- Rank 0 owns the DB: it claims the run for each worker-group start (``db.claim_run``: one
  attempt row, host = ``hostname/node id``), writes a ``workers`` artifact with every rank's
  node and pid, metrics via the DB reporter; attempt ends go through ``finish_attempt`` with
  their fault class -- never around the results_db API.
- Every rank saves its part of each DeepSpeed checkpoint into the run's checkpoint dir (a path
  all nodes reach), so a restarted group resumes from the last complete checkpoint.
- Failures: ``RunConfig(failure_config=FailureConfig(max_failures=retries))`` restarts the
  whole worker group after a worker or node dies; metric writes are upserts per (run, name,
  step), so the steps the new attempt re-trains replace, never duplicate, the old points.
  Before training, rank 0 claims the run and broadcasts go/no-go: a run that was cancelled,
  whose last failure is not worth retrying (its attempt's fault class,
  orchestrator/run/health/faults.py), or that another driver holds, stops on every rank instead of
  training.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from contract.reporter import MemoryReporter
from contract.states import RunStatus
from orchestrator.run.cluster import check_parallelism, host_label, live_nodes, scaling_kwargs
from orchestrator.run.env import prepare_trial_env
from orchestrator.run.health.faults import Fault, RetryPolicy, classify, describe
from orchestrator.run.trial.sweep_stop import stopped
from orchestrator.run.trial.trial_job import TrialJob, run_id_of
from orchestrator.run.trial.trial_result import TrialResult, TrialStatus

if TYPE_CHECKING:
    from ray.train import TrainContext

TRAIN_DIR = "_train"  # Ray Train's own run state, under the sweep's storage


class _Abort(RuntimeError):
    """Raised on rank 0 to tear the worker group down (cancelled / not retried): the other
    ranks may be inside a collective and can only be stopped by Train."""


def dispatch_trial(config: dict[str, Any], jobs: Mapping[int, TrialJob]) -> None:
    """The Tune function trainable for every run (config: trial_job.trial_config, ``jobs``
    through tune.with_parameters): in-process for one worker (runner.py), a TorchTrainer for
    several."""
    job = jobs[run_id_of(config)]
    if not job.is_multiworker:
        from orchestrator.run.trial.runner import run_trial

        run_trial(job)
        return
    run_multiworker_trial(job)


def run_multiworker_trial(job: TrialJob) -> None:
    prepare_trial_env()
    from ray import tune

    ctx = tune.get_context()
    storage = job.train_storage or str(job.checkpoint_dir.parent / TRAIN_DIR)
    result = fit_run(job, storage, retries=job.retries, trial_id=ctx.get_trial_id(),
                     in_tune=True)
    if result.status != RunStatus.SUCCEEDED:
        tune.report(result.report())  # success already reached Tune through TuneReportCallback


def fit_run(job: TrialJob, storage: str, retries: int = 0, trial_id: str | None = None,
            in_tune: bool = False) -> TrialResult:
    """Train ``job`` on a Ray Train worker group (``ray.init`` must have run); returns rank 0's
    final result ({"status", "steps", ...}). Never raises for a training failure: the DB
    records it and the result says ``failed``."""
    from ray.train import FailureConfig, RunConfig, ScalingConfig, TrainingFailedError
    from ray.train.torch import TorchTrainer


    spec = job.spec
    check_parallelism(spec)
    gpus = sum(n.gpus for n in live_nodes())
    callbacks: list[Any] = []  # ray.tune.Callback; Train's RunConfig is typed with its own
    if in_tune:
        from ray.tune.integration.ray_train import TuneReportCallback

        callbacks.append(TuneReportCallback())
    job = replace(job, retries=retries)
    trial_id = trial_id or f"fit-{uuid.uuid4().hex[:8]}"  # a group restart = the same trial
    trainer = TorchTrainer(
        worker_loop, train_loop_config={"job": job, "trial_id": trial_id},
        scaling_config=ScalingConfig(**scaling_kwargs(spec.resources, gpus)),
        run_config=RunConfig(name=f"{job.name}-{time.strftime('%Y%m%d-%H%M%S')}-"
                                  f"{os.getpid()}", storage_path=storage,
                             failure_config=FailureConfig(max_failures=retries),
                             callbacks=callbacks))
    try:
        trainer.fit()
    except TrainingFailedError as exc:
        return _record_group_failure(job, exc)
    return _final_result(job)


def _final_result(job: TrialJob) -> TrialResult:
    """The run's outcome as the DB has it (rank 0 wrote it; Train's Result may carry none)."""
    import results_db

    db = results_db.open(job.db_url, migrate=False)
    try:
        row = db.run(job.run_id)
        attempts = db.attempts(job.run_id)
        return TrialResult(_status(row.status if row else RunStatus.FAILED),
                           attempts=len(attempts))
    finally:
        db.close()


def _record_group_failure(job: TrialJob, exc: BaseException) -> TrialResult:
    """Train gave up: close an attempt of this driver the dead workers left running."""
    import results_db

    text = "".join(traceback.format_exception(exc))[-20000:]
    fault = classify(exc, text)
    db = results_db.open(job.db_url, migrate=False)
    try:
        attempts = db.attempts(job.run_id)
        if attempts and attempts[-1].status == RunStatus.RUNNING and \
                attempts[-1].owner == job.owner:
            db.finish_attempt(attempts[-1].id, RunStatus.FAILED,
                              error=f"worker group failed: {str(exc).splitlines()[0][:500]}"
                                    + describe(fault, False), traceback=text, fault=fault)
        row = db.run(job.run_id)
        return TrialResult(_status(row.status if row else RunStatus.FAILED), fault=fault.value)
    finally:
        db.close()


def _status(run_status: str) -> TrialStatus:
    """A run state as a trial status (every run state is one; TrialResult checks it)."""
    return cast(TrialStatus, str(run_status))


# ---- inside every Ray Train worker ------------------------------------------------------------
def _launcher_env(ctx: TrainContext) -> None:
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
    job: TrialJob = config["job"]
    rank = ctx.get_world_rank()
    policy = job.policy
    decision = [_rank0_decide(job, config["trial_id"], policy) if rank == 0 else None]
    tdist.broadcast_object_list(decision, src=0)
    status, attempt_id, holder = cast("tuple[str, int | None, str]", decision[0])  # rank 0's
    if status != "go" or attempt_id is None:
        ray.train.report(TrialResult(_status(status), steps=0, holder=holder or None).report())
        return
    workers = _gather_workers()  # a collective: every rank, in the same order
    if rank == 0:
        result = _rank0_attempt(job, attempt_id, workers)
    else:
        result = _other_rank(job, policy)
    ray.train.report(result.report())


def _rank0_decide(job: TrialJob, trial_id: str, policy: RetryPolicy
                  ) -> tuple[str, int | None, str]:
    """("go", attempt id, "") after claiming the run, or the status the run keeps: cancelled,
    failed (this trial's last failure is not worth retrying), skipped (another holder)."""
    import results_db

    db = results_db.open(job.db_url, migrate=False)
    try:
        row = db.run(job.run_id)
        if row is None or row.status == RunStatus.CANCELLED:
            return RunStatus.CANCELLED, None, ""
        last = db.current_attempt(job.run_id)
        if (row.status == RunStatus.FAILED and last is not None and last.trial_id == trial_id
                and last.owner == job.owner  # trial ids of two drivers can be equal
                and last.fault and not policy.should_retry(Fault(last.fault))):
            return RunStatus.FAILED, None, ""
        att = db.claim_run(job.run_id, job.owner, host_label(), trial_id=trial_id,
                           heartbeat_s=job.heartbeat_s)
        if att is None:
            return "skipped", None, str(db.claim_refusal(job.run_id))
        return "go", att.id, ""
    finally:
        db.close()


def _gather_workers() -> list[dict[str, Any]]:
    """Every rank's node, host and pid (rank order): the ``workers`` artifact."""
    import ray
    import torch.distributed as tdist

    me = {"rank": tdist.get_rank(), "pid": os.getpid(), "host": socket.gethostname(),
          "node_id": ray.get_runtime_context().get_node_id()}
    out: list[Any] = [None] * tdist.get_world_size()
    tdist.all_gather_object(out, me)
    return out


def _rank0_attempt(job: TrialJob, attempt_id: int, workers: list[dict[str, Any]]
                   ) -> TrialResult:
    import results_db
    from orchestrator.run.trial.reporter import DBReporter
    from orchestrator.run.trial.runner import train_attempt

    db = results_db.open(job.db_url, migrate=False)
    db.add_artifact(job.run_id, attempt_id, "workers", data={"workers": workers})
    reporter = DBReporter(db, job.run_id, attempt_id, heartbeat_s=job.heartbeat_s,
                          flush_s=job.flush_s, db_wait_s=job.db_wait_s,
                          sweep_stopped=lambda: stopped(job.owner))
    try:
        result = train_attempt(db, job, attempt_id, reporter)  # records failures itself
    except BaseException as exc:  # recorded, and worth another attempt: restart the group
        raise _Abort(f"rank 0: {type(exc).__name__}: {exc}") from exc
    finally:
        db.close()
    if result.status in (RunStatus.CANCELLED, "superseded"):
        raise _Abort(f"run {result.status}")  # the other ranks may wait in a collective
    return result  # succeeded / diverged, or failed with a fault every rank shares


def _other_rank(job: TrialJob, policy: RetryPolicy) -> TrialResult:
    from trainer.train import train

    try:
        res = train(job.spec, MemoryReporter(), job.checkpoint_dir)  # reports nothing
    except BaseException as exc:
        fault = classify(exc, traceback.format_exc())
        if fault is Fault.CODE_ERROR and not policy.should_retry(fault):
            return TrialResult(RunStatus.FAILED, fault=fault.value)
        raise
    return TrialResult(res.status, steps=res.steps)
