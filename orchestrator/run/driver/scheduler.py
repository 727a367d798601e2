"""Run pending runs as Ray Tune trials (one trial per run) and keep the DB consistent.

Ray only executes; the DB holds the truth. Each trial claims its run
(orchestrator/run/trial/runner.py, ``db.claim_run``) and records its own end; ``DBSyncCallback``
(trial_sync.py) records the deaths it cannot report itself (worker killed, node lost, crash before
its try block) with their fault class, whether Tune retries them (``on_trial_recover``) or not
(``on_trial_error``); the driver's LeaseKeeper (orchestrator/run/health/leases.py) records silent
deaths within a few heartbeats. A trial that loses the claim (another driver holds the run) trains
nothing; the driver says who holds it and waits for that run to end, so its summary covers every
run it was given. On Ctrl-C/SIGTERM the driver marks the runs it was executing ``cancelled``
before stopping Ray.

A results DB that cannot be used (disk full, server restarting) does not kill the driver: the
callback's writes are retried with backoff (orchestrator/run/health/dbretry.py), which pauses Tune's
loop and so the scheduling of new trials; the lease keeper watches the DB between callbacks. Once
the outage outlasts ``GATESWEEP_DB_WAIT_S`` (300 s) a Tune stopper ends the sweep, the driver ends
its own attempts ``db_unavailable`` where the DB lets it and raises ``DBOutage`` (one line, exit 2);
``orchestrator rerun --sweep S`` finishes the rest once the DB is back.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

from ray.tune import Callback

import results_db
from contract import env
from contract.config import Resources
from contract.errors import Interrupted, UserError
from contract.states import CANCELLABLE, RunStatus, stale_after_s
from orchestrator.run.cluster import (
    live_nodes,
    max_concurrent_trials,
    resolve_address,
    storage_warning,
    trial_bundles,
)
from orchestrator.run.driver.quiet_logs import one_line_trial_errors
from orchestrator.run.env import (
    absolute_db_url,
    driver_defaults,
    trial_runtime_env,
    worker_env_vars,
)
from orchestrator.run.health.dbretry import (
    DB_WAIT_ENV,
    DBOutage,
    OutageState,
    cause,
    db_wait_s,
    with_db_retry,
)
from orchestrator.run.health.faults import Fault, RetryPolicy
from orchestrator.run.health.leases import LeaseKeeper
from orchestrator.run.trial.multiworker import dispatch_trial
from orchestrator.run.trial.trial_job import (
    RUN_KEY,
    PackedJobs,
    TrialJob,
    driver_owner,
    heartbeat_interval,
    run_id_of,
    trial_config,
)
from orchestrator.run.trial.trial_result import TrialResult
from orchestrator.run.trial.trial_sync import DBSyncCallback, OutageStopper
from results_db import DBUnavailable

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ray.tune.experiment import Trial

    from results_db import ResultsDB

WAIT_POLL_S = 1.0


@dataclass
class Options:
    db_url: str
    storage: Path
    experiment: str
    retries: int = 0
    max_concurrent: int | None = None
    address: str | None = None
    # shows the runs' progress while the sweep runs (the CLI's live table), or None
    progress: Callable[[ResultsDB, list[int]], AbstractContextManager[Any]] | None = None
    owner: str = field(default_factory=driver_owner)  # this driver's lease id
    say: Callable[[str], None] = print  # one line to the user (skips, deaths, waits)
    # Reusing trial processes skips worker start + torch/DeepSpeed import per trial (smoke
    # sweep: 34 s instead of 60 s on 2 cores). GATESWEEP_REUSE_ACTORS=0 turns it off.
    reuse_actors: bool = field(default_factory=lambda: env.flag("GATESWEEP_REUSE_ACTORS"))
    extra_env: dict[str, str] = field(default_factory=dict)
    # Tune's per-trial result.json / progress.csv (tune_file_loggers): off unless asked for
    tune_files: bool = field(default_factory=lambda: env.flag("GATESWEEP_TUNE_FILES"))


def tune_file_loggers(on: bool) -> list[Callback]:
    """Tune's result.json and progress.csv per trial, only when asked for (``on``:
    GATESWEEP_TUNE_FILES=1). The results DB holds every metric and end; the two files per
    trial repeat it, and writing them was ~6 % of a 1,000-run sweep's driver samples and
    2,000 files (docs/benchmarks.md "Per-run overhead, round 6"). Never Tune's TensorBoard
    logger: its tensorboardX import pulls torch into the driver (~3 CPU-s of every start);
    driver_defaults() turns Tune's automatic loggers off (TUNE_DISABLE_AUTO_CALLBACK_LOGGERS),
    and setting that to 0 brings all three back."""
    if not on:
        return []
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    return [CSVLoggerCallback(), JsonLoggerCallback()]


@contextlib.contextmanager
def ray_session(address: str | None, extra_env: dict[str, str] | None = None) -> Iterator[None]:
    """A local Ray cluster (own short temp dir: socket paths have a ~107 char limit) or a
    connection to ``address`` / RAY_ADDRESS."""
    import ray

    driver_defaults()
    env_vars = {**worker_env_vars(), **(extra_env or {})}
    address = resolve_address(address)
    tmp = None
    try:
        # the job's own empty working_dir keeps the user's directory off the workers' sys.path
        with tempfile.TemporaryDirectory(prefix="gsworkdir") as empty:
            runtime_env = trial_runtime_env(env_vars, empty)
            if address:
                ray.init(address=address, runtime_env=runtime_env, log_to_driver=False)
            else:
                tmp = tempfile.mkdtemp(prefix="gsray", dir="/tmp")
                ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, _temp_dir=tmp,
                         runtime_env=runtime_env, log_to_driver=False,
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
        if tmp and not env.flag("GATESWEEP_KEEP_RAY_TMP"):
            shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM behaves like Ctrl-C (KeyboardInterrupt in the main thread)."""
    def handler(signum: int, frame: FrameType | None) -> None:
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


def concurrency(jobs: list[TrialJob], requested: int | None) -> int:
    """max_concurrent_trials: the request, else what the cluster's CPUs/GPUs allow."""
    import ray


    if any(j.workers > 1 for j in jobs):  # worker slots per node (orchestrator/run/cluster.py)
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


def execute(jobs: list[TrialJob], opts: Options) -> dict[int, str]:
    """Run ``jobs`` to completion; returns {run_id: final DB status}. Runs another driver
    holds are waited for (their final status counts). Raises Interrupted after marking the
    unfinished runs cancelled when the user stops it."""

    if not jobs:
        return {}
    opts.db_url = absolute_db_url(opts.db_url)
    hb, wait_s = heartbeat_interval(), db_wait_s()
    jobs = [replace(j, db_url=opts.db_url, owner=opts.owner, retries=opts.retries,
                    heartbeat_s=hb, flush_s=env.seconds("GATESWEEP_FLUSH_S"), db_wait_s=wait_s,
                    retry_code_errors=RetryPolicy.from_env(opts.retries).retry_code_errors)
            for j in jobs]
    db = results_db.open(opts.db_url)
    ids = [j.run_id for j in jobs]
    outage = OutageState(wait_s=wait_s)
    progress = opts.progress(db, ids) if opts.progress else contextlib.nullcontext()
    try:
        with one_line_trial_errors(opts.tune_files), ray_session(opts.address, opts.extra_env):
            _warn_local_storage(opts)
            try:
                with _sigterm_as_interrupt(), \
                        LeaseKeeper(db, ids, opts.owner, hb, opts.say, outage), progress:
                    skipped = _fit(jobs, opts, outage)
                    if not outage.expired:
                        wait_for_holders(db, list(skipped), opts.say, wait_s)
            except KeyboardInterrupt:
                # Before Ray stops: stopping it SIGTERMs the trials, which checkpoint and
                # record themselves `preempted` (the run `lost`, not `cancelled`: seen in a
                # loaded test run). Cancelled first, their late reports are refused.
                _interrupted(db, ids)
    except KeyboardInterrupt:  # while Ray starts or stops
        _interrupted(db, ids)
    except DBOutage as exc:
        outage.give_up(exc)
    if not outage.expired:
        try:
            return with_db_retry(lambda: db.run_statuses(ids), "reading the final states",
                                 wait_s)
        except DBOutage as exc:
            outage.give_up(exc)
    raise _gave_up(db, jobs, opts.owner, outage, opts.say)


def _warn_local_storage(opts: Options) -> None:
    """Say once when the cluster spans machines but --storage is machine-local: a retried
    attempt on another node would not find its checkpoint (docs/cluster.md, "Checkpoints")."""

    if warning := storage_warning(str(opts.storage), live_nodes()):
        opts.say(f"warning: {warning}")


def _gave_up(db: ResultsDB, jobs: list[TrialJob], owner: str, outage: OutageState,
             say: Callable[[str], None]) -> DBOutage:
    """The DB stayed unusable past the bound and the sweep stopped (its trials are gone with
    the Ray session). Leave one known state: wait once more (the same bound) for the DB, end
    this driver's running attempts ``db_unavailable`` (their runs ``lost``, resumable) and free
    its queued runs for ``rerun``; then say in one line what happened, with the cause as it is
    now, and what finishes the sweep."""

    sweep = jobs[0].spec.sweep
    then = outage.first_error or outage.error
    rerun = f"`orchestrator rerun --sweep {sweep}`"
    try:
        lost, queued = with_db_retry(lambda: _record_stop(db, jobs, owner, outage),
                                     "recording the stopped sweep", outage.wait_s, say=say)
    except DBUnavailable as exc:  # still down: the next submit/rerun reconciles the runs
        return DBOutage(f"{cause(str(exc))}; it stayed unusable for "
                        f"more than {outage.wait_s:g} s ({DB_WAIT_ENV}), so the sweep stopped; "
                        f"once the DB is back, {rerun} finishes the unfinished runs")
    return DBOutage(f"{cause(then)}; it was unusable for more than "
                    f"{outage.wait_s:g} s ({DB_WAIT_ENV}), so the sweep stopped. It answers "
                    f"again now: {lost} unfinished run(s) recorded lost (resumable), {queued} "
                    f"not started; {rerun} finishes them")


def _record_stop(db: ResultsDB, jobs: list[TrialJob], owner: str, outage: OutageState
                 ) -> tuple[int, int]:
    """(attempts ended ``db_unavailable``, runs still pending) of this driver's runs."""
    lost = 0
    for j in jobs:
        att = db.current_attempt(j.run_id)
        if att is not None and att.status == RunStatus.RUNNING and att.owner == owner:
            db.finish_attempt(att.id, RunStatus.FAILED, fault=Fault.DB_UNAVAILABLE,
                              error=f"the sweep stopped: the results DB was unusable for more "
                                    f"than {outage.wait_s:g} s: {outage.first_error}")
            lost += 1
    ids = [j.run_id for j in jobs]
    db.release_leases(ids, owner)
    queued = sum(1 for i in ids if (r := db.run(i)) is not None and r.status == RunStatus.PENDING)
    return lost, queued


def trial_name(trial: Trial) -> str:
    """Tune's name and folder of a trial: its run's name, from the trial's config. Module
    level on purpose: Tune cloudpickles the name creators into every trial's saved state, and
    a closure over the sweep's names made that ~36 KB per trial (at 1,000 runs, tens of MB
    per experiment-state save)."""
    return str(trial.config[RUN_KEY]["name"])


def trial_space(jobs: list[TrialJob]
                ) -> tuple[list[dict[str, Any]], Callable[[dict[str, Any]], Any]]:
    """(each trial's config, the resources hook) for the Tuner. Tune unpickles the trainable,
    resources hook included, for every trial: the hook closes over the sweep's few distinct
    placements only (a multi-worker coordinator's is {CPU: 0.01}: orchestrator.run.cluster),
    and each trial's config names its own (trial_job.trial_config)."""
    from ray.tune import PlacementGroupFactory

    shapes: list[list[dict[str, float]]] = []
    configs = []
    for job in jobs:
        bundles = trial_bundles(job.spec.resources)
        if bundles not in shapes:
            shapes.append(bundles)
        configs.append(trial_config(job, shapes.index(bundles)))

    def resources(config: dict[str, Any]) -> PlacementGroupFactory:
        return PlacementGroupFactory(shapes[config[RUN_KEY]["shape"]])

    return configs, resources


def _interrupted(db: ResultsDB, ids: list[int]) -> NoReturn:
    """The user stopped the sweep: its pending and running runs become ``cancelled``."""
    cancelled = db.set_status(ids, RunStatus.CANCELLED, only_from=CANCELLABLE)
    raise Interrupted(f"interrupted: {len(cancelled)} run(s) marked cancelled") from None


def _fit(jobs: list[TrialJob], opts: Options, outage: OutageState | None = None
         ) -> dict[int, str]:
    """Tune over ``jobs``; returns {run_id: holder message} of the runs another driver held."""
    from ray import tune


    by_id = {j.run_id: j for j in jobs}
    configs, resources = trial_space(jobs)

    # The typed jobs travel once through Ray's object store (with_parameters), each pickled
    # on its own (PackedJobs: a trial unpickles only its job); Tune's own config holds only
    # the run id (Tune flattens and rewrites config values).
    packed = PackedJobs(by_id)
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(dispatch_trial, jobs=packed), resources),
        param_space={RUN_KEY: tune.grid_search(configs)},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=concurrency(jobs, opts.max_concurrent),
            reuse_actors=opts.reuse_actors,
            trial_name_creator=trial_name, trial_dirname_creator=trial_name),
        run_config=tune.RunConfig(
            name=opts.experiment, storage_path=str((opts.storage / "_tune").resolve()),
            failure_config=tune.FailureConfig(max_failures=opts.retries),
            stop=OutageStopper(outage, opts.owner),
            callbacks=[DBSyncCallback(opts.db_url, opts.owner, opts.retries, outage,
                                      opts.say), *tune_file_loggers(opts.tune_files)],
            verbose=0),
    )
    grid = tuner.fit()  # trial errors do not raise here; the DB has the per-run outcome
    skipped: dict[int, str] = {}
    for res in (grid[i] for i in range(len(grid))):  # ResultGrid: __getitem__, no __iter__
        result = TrialResult.from_report(res.metrics)
        if result is not None and result.status == "skipped":
            rid = run_id_of(res.config or {})
            skipped[rid] = result.holder or ""
            opts.say(f"{skipped[rid]}: not started here")
    return skipped


def wait_for_holders(db: ResultsDB, run_ids: list[int], say: Callable[[str], None],
                     wait_s: float | None = None) -> None:
    """Runs another live driver holds: wait until they leave ``running`` (a silent holder is
    turned ``lost`` by the reconciler after its own heartbeat interval). A DB outage is
    waited out (up to ``wait_s``, default GATESWEEP_DB_WAIT_S); after one, nobody could
    heartbeat, so the reconciler waits one staleness window before judging."""

    wait_s = db_wait_s() if wait_s is None else wait_s

    def running(ids: list[int]) -> list[int]:
        return with_db_retry(lambda: [i for i in ids if (r := db.run(i)) is not None
                                      and r.status == RunStatus.RUNNING], "wait for holders",
                                     wait_s)

    waiting = running(run_ids)
    if waiting:
        say(f"waiting for {len(waiting)} run(s) held by another driver: ids "
            + ", ".join(map(str, waiting)))
    answering_since = time.monotonic()
    while waiting:
        time.sleep(WAIT_POLL_S)
        t0 = time.monotonic()
        waiting = running(waiting)
        if time.monotonic() - t0 > WAIT_POLL_S:  # it waited out an outage
            answering_since = time.monotonic()
        if waiting and time.monotonic() - answering_since > stale_after_s(None):
            with_db_retry(db.reconcile, "wait for holders", wait_s)
            waiting = running(waiting)


def experiment_name(sweep: str) -> str:
    return f"{sweep}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
