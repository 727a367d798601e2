"""Run pending runs as Ray Tune trials (one trial per run) and keep the DB consistent.

Ray only executes; the DB holds the truth. The trial function (orchestrator/runner.py) writes
its own attempt rows; ``DBSyncCallback`` covers the deaths it cannot report itself (worker
killed, import error before its try block); on Ctrl-C/SIGTERM the driver marks the runs it
was executing ``cancelled`` before stopping Ray.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.tune import Callback

from orchestrator.env import absolute_db_url, driver_defaults, worker_env_vars
from orchestrator.errors import UserError

ACTIVE = ("pending", "running")


@dataclass(frozen=True)
class Job:
    """One run to execute: its DB id, name, RunSpec JSON and checkpoint directory."""

    run_id: int
    name: str
    spec: dict[str, Any]
    checkpoint_dir: Path
    cpus: float = 1.0
    gpus: float = 0.0
    workers: int = 1


@dataclass
class Options:
    db_url: str
    storage: Path
    experiment: str
    retries: int = 0
    max_concurrent: int | None = None
    address: str | None = None
    progress: Any = None  # a callable(db, run_ids) -> context manager, or None
    # Reusing trial processes skips worker start + torch/DeepSpeed import per trial (smoke
    # sweep: 34 s instead of 60 s on 2 cores). GATESWEEP_REUSE_ACTORS=0 turns it off.
    reuse_actors: bool = field(
        default_factory=lambda: os.environ.get("GATESWEEP_REUSE_ACTORS", "1") != "0")
    extra_env: dict[str, str] = field(default_factory=dict)


class Interrupted(Exception):
    """The user stopped the sweep (SIGINT/SIGTERM); runs were marked cancelled."""


def checkpoint_dir(storage: Path, sweep: str, run_name: str) -> Path:
    """<storage>/<sweep>/<run-name>/checkpoints (kept outside Tune's trial dirs so a rerun,
    a new Tune experiment, resumes from it)."""
    return (storage / sweep / run_name / "checkpoints").resolve()


@contextlib.contextmanager
def ray_session(address: str | None, extra_env: dict[str, str] | None = None) -> Iterator[None]:
    """A local Ray cluster (own short temp dir: socket paths have a ~107 char limit) or a
    connection to ``address`` / RAY_ADDRESS."""
    import ray

    driver_defaults()
    env = {**worker_env_vars(), **(extra_env or {})}
    address = address or os.environ.get("RAY_ADDRESS") or None
    tmp = None
    try:
        if address:
            ray.init(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
        else:
            tmp = tempfile.mkdtemp(prefix="gsray", dir="/tmp")
            ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _temp_dir=tmp,
                     runtime_env={"env_vars": env}, log_to_driver=False,
                     configure_logging=False)
    except Exception as exc:  # noqa: BLE001 - turn any start failure into one sentence
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        where = f"at {address}" if address else "locally"
        raise UserError(f"could not start or reach Ray {where}: {exc}") from exc
    try:
        yield
    finally:
        ray.shutdown()
        if tmp and not os.environ.get("GATESWEEP_KEEP_RAY_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C (KeyboardInterrupt in the main thread)."""
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def concurrency(jobs: list[Job], requested: int | None) -> int:
    """max_concurrent_trials: the request, else what the cluster's CPUs/GPUs allow."""
    import ray

    from orchestrator.cluster import live_nodes, max_concurrent_trials
    from trainer.config import Resources

    if any(j.workers > 1 for j in jobs):  # worker slots per node (orchestrator/cluster.py)
        return max_concurrent_trials([Resources(cpus=j.cpus, gpus=j.gpus, workers=j.workers)
                                      for j in jobs], live_nodes(), requested)
    if requested:
        return requested
    res = ray.cluster_resources()
    per_cpu = max(j.cpus for j in jobs)
    n = int(res.get("CPU", 1) // per_cpu) if per_cpu > 0 else len(jobs)
    per_gpu = max(j.gpus for j in jobs)
    if per_gpu > 0:
        n = min(n, int(res.get("GPU", 0) // per_gpu))
    if n < 1:
        raise UserError(f"the cluster ({res.get('CPU', 0):g} CPUs, {res.get('GPU', 0):g} GPUs) "
                        f"cannot fit one trial needing {per_cpu:g} CPUs and {per_gpu:g} GPUs")
    return max(1, min(n, len(jobs)))


def execute(jobs: list[Job], opts: Options) -> dict[int, str]:
    """Run ``jobs`` to completion; returns {run_id: final DB status}. Raises Interrupted after
    marking the unfinished runs cancelled when the user stops it."""
    import results_db

    if not jobs:
        return {}
    opts.db_url = absolute_db_url(opts.db_url)
    db = results_db.open(opts.db_url)
    ids = [j.run_id for j in jobs]
    progress = opts.progress(db, ids) if opts.progress else contextlib.nullcontext()
    try:
        with ray_session(opts.address, opts.extra_env), _sigterm_as_interrupt(), progress:
            _fit(jobs, opts)
    except KeyboardInterrupt:
        cancelled = _cancel_unfinished(db, ids)
        raise Interrupted(f"interrupted: {len(cancelled)} run(s) marked cancelled") from None
    return {i: db.run(i).status for i in ids}


def _cancel_unfinished(db: Any, ids: list[int]) -> list[int]:
    active = [i for i in ids if (r := db.run(i)) is not None and r.status in ACTIVE]
    return db.set_status(active, "cancelled")


def _fit(jobs: list[Job], opts: Options) -> None:
    from ray import tune
    from ray.tune import PlacementGroupFactory

    from orchestrator.multiworker import dispatch_trial, trial_placement
    from orchestrator.runner import job_config

    configs = [{**job_config(j.run_id, j.name, j.spec, opts.db_url, j.checkpoint_dir),
                "retries": opts.retries} for j in jobs]

    def resources(config: dict[str, Any]) -> PlacementGroupFactory:
        return trial_placement(config["job"])  # {CPU: 0.01} for a multi-worker coordinator

    tuner = tune.Tuner(
        tune.with_resources(dispatch_trial, resources),
        param_space={"job": tune.grid_search(configs)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=concurrency(jobs, opts.max_concurrent),
            reuse_actors=opts.reuse_actors,
            trial_name_creator=_trial_name, trial_dirname_creator=_trial_name),
        run_config=tune.RunConfig(
            name=opts.experiment, storage_path=str((opts.storage / "_tune").resolve()),
            failure_config=tune.FailureConfig(max_failures=opts.retries),
            callbacks=[DBSyncCallback(opts.db_url)], verbose=0),
    )
    tuner.fit()  # trial errors do not raise here; the DB has the per-run outcome


def _trial_name(trial: Any) -> str:
    return str(trial.config["job"]["name"])


def experiment_name(sweep: str) -> str:
    return f"{sweep}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


class DBSyncCallback(Callback):  # type: ignore[misc]
    """Driver-side: a trial that errored without recording it (worker killed, crash before
    its try block) still ends as ``failed`` in the DB, with Tune's error text."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url

    def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
        import results_db

        db = results_db.open(self.db_url)
        run_id = int(trial.config["job"]["run_id"])
        row = db.run(run_id)
        if row is None or row.status not in ACTIVE:
            return  # the trial recorded its own end (the normal case)
        text = _trial_error_text(trial)
        if row.status == "pending":  # died before start_attempt: give the error a home
            attempt_id: int | None = db.start_attempt(run_id, host=socket.gethostname(),
                                                      trial_id=trial.trial_id).id
        else:
            attempt_id = _latest_attempt(db, run_id)
        if attempt_id is not None:
            first = text.strip().splitlines()[-1] if text.strip() else "?"
            db.finish_attempt(attempt_id, "failed", error=f"trial died: {first}",
                              traceback=text or None)


def _latest_attempt(db: Any, run_id: int) -> int | None:
    attempts = db.attempts(run_id)  # ordered by number
    return attempts[-1].id if attempts else None


def _trial_error_text(trial: Any) -> str:
    try:
        path = trial.error_file
        if path and Path(path).exists():
            return Path(path).read_text(errors="replace")[-20000:]
    except Exception:  # noqa: BLE001 - best effort: the error file is Tune's, not ours
        pass
    return "the trial process exited without reporting (killed or crashed)"
