"""Run a sweep YAML in this process, one run after another, into a results DB -- without Ray.

    python -m benchmarks.device_sweep SWEEP.yaml [--db sqlite:////path/x.db] [--storage DIR]
                                     [--copy-to FILE]

For a borrowed GPU box that has torch but no Ray (benchmarks/device_run.sh's sweep step): the
product's own path minus the scheduler -- ``orchestrator.run.driver.submit.make_plan`` (parse,
validate, expand), ``register`` (sweep + run rows, dedupe), ``jobs_for`` and, per run,
``orchestrator.run.trial.runner.execute_job`` (claim, DB reporter, ``trainer.train``, record the
end). The DB afterwards is what ``orchestrator submit`` would have written; copy it home and read it
with ``orchestrator leaderboard`` / the dashboard. Re-running skips finished runs and resumes the
rest. Exit code 0 when every run of the sweep succeeded or diverged.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _placeholder_ray_if_missing() -> None:
    """orchestrator/run/driver/scheduler.py subclasses ``ray.tune.Callback`` when imported
    (submit.py imports it); this path never calls Ray, so on a box without Ray the import gets a
    placeholder base class. Nothing else of Ray is provided: a call into it fails loudly."""
    try:
        import ray.tune  # noqa: F401
    except ImportError:
        ray, tune = types.ModuleType("ray"), types.ModuleType("ray.tune")
        tune.Callback = object  # type: ignore[attr-defined]
        ray.tune = tune  # type: ignore[attr-defined]
        sys.modules["ray"], sys.modules["ray.tune"] = ray, tune
        print("device_sweep: Ray is not installed; running in-process without it", flush=True)


def run(sweep: Path, db_url: str, storage: Path) -> int:
    _placeholder_ray_if_missing()
    import results_db
    from orchestrator.run.driver.submit import jobs_for, make_plan, register
    from orchestrator.run.env import prepare_trial_env
    from orchestrator.run.trial.runner import execute_job
    from orchestrator.run.trial.trial_job import driver_owner, heartbeat_interval
    from trainer.preempt import Preempted

    plan = make_plan(sweep)
    db = results_db.open(db_url)
    res = register(db, plan, force=False)
    print(f"{plan.spec.name}: {len(plan.runs)} runs, {len(res.to_run)} to run", flush=True)
    owner = driver_owner("device-sweep")
    prepare_trial_env()
    for job in jobs_for(res.to_run, plan, storage, db_url):
        job = dataclasses.replace(job, owner=owner, heartbeat_s=heartbeat_interval())
        t0 = time.perf_counter()
        try:
            out = execute_job(job).report()
        except Preempted as exc:  # recorded by execute_job; re-raised when it would retry
            out = {"status": "failed", "fault": "preempted", "steps": exc.step}
        print(f"  {job.name}: {out.get('status')} after {out.get('steps')} steps, "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
        if out.get("fault") == "preempted":  # SIGTERM (e.g. the step's timeout): stop here
            print("device_sweep: preempted; the remaining runs stay pending", flush=True)
            break
    ids = [r.id for r in (*res.cached, *res.to_run, *res.running)]
    statuses = {row.name: row.status for row in (db.run(i) for i in ids) if row is not None}
    db.close()
    ok = ("succeeded", "diverged")
    bad = {n: s for n, s in statuses.items() if s not in ok}
    print(f"{plan.spec.name}: {len(statuses) - len(bad)} of {len(statuses)} runs finished "
          f"ok" + (f"; not ok: {bad}" if bad else ""), flush=True)
    return 1 if bad or not statuses else 0


def copy_sqlite(db_url: str, dest: Path) -> None:
    """One self-contained file (no -wal/-shm beside it), through results_db's backup."""
    import results_db

    results_db.backup_sqlite(db_url, dest)
    print(f"device_sweep: copied the results DB to {dest}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--db", default=None, help="results DB URL (default: sqlite:///<storage>/"
                                               "device_sweep.db)")
    ap.add_argument("--storage", type=Path, default=Path("runs"),
                    help="checkpoint root (default ./runs)")
    ap.add_argument("--copy-to", type=Path, default=None,
                    help="afterwards, copy an SQLite results DB into this single file")
    args = ap.parse_args(argv)
    storage = args.storage.resolve()
    storage.mkdir(parents=True, exist_ok=True)
    db_url = args.db or f"sqlite:///{storage / 'device_sweep.db'}"
    try:
        return run(args.sweep, db_url, storage)
    finally:
        if args.copy_to is not None and db_url.startswith("sqlite:///"):
            copy_sqlite(db_url, args.copy_to)


if __name__ == "__main__":
    sys.exit(main())
