"""What gatesweep adds to one short trial, in one process: wall, CPU, transactions, statements.

    python benchmarks/trial_overhead.py [--runs 40] [--steps 2] [--db sqlite|postgresql]

The cluster benchmark (benchmarks/cluster_scale.py) gives the end-to-end ratio; this one says
where a trial's share of it goes, without Ray or other processes in the way. One process
trains the same ``tiny`` RunSpecs twice, alternating run by run so that load drifts hit both:
1. bare: ``trainer.train`` with an in-memory reporter (what bare Ray Tune's trial does);
2. gatesweep: ``orchestrator.run.trial.runner.execute_job`` against the results DB (claim, reporter
   with its heartbeat thread, flushes, artifacts, the end), one DB handle per process as a
   reused trial actor has (orchestrator/run/trial/trial_db.py).
Per trial it counts transactions and statements (tests/support/sqlcounter.py; the pool's pings
run on the raw connection and are not counted) and the CPU of this process and of the
PostgreSQL server's processes. Prints the figures side by side and the extra per trial.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SWEEP = """name: overhead
base:
  model: {{preset: tiny}}
  train: {{steps: {steps}, batch_size: 2, seq_len: 16, warmup: 0, eval_every: 0,
          eval_batches: 1, log_every: 1, checkpoint_every: 0}}
seeds: {seeds}
"""


def server_cpu(pg_root: Path | None) -> float:
    """CPU seconds of the PostgreSQL server's processes (0 for SQLite)."""
    if pg_root is None:
        return 0.0
    import psutil

    total = 0.0
    for p in psutil.process_iter(["cmdline"]):
        try:
            if p.info["cmdline"] and "postgres" in p.info["cmdline"][0]:
                t = p.cpu_times()
                total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            continue
    return total


def measure(fn: Any, counter: Any, pg_root: Path | None) -> dict[str, float]:
    tx, st, srv = counter.tx, counter.stmts, server_cpu(pg_root)
    c, w = time.process_time(), time.perf_counter()
    fn()
    return {"wall_ms": 1e3 * (time.perf_counter() - w), "cpu_ms": 1e3 * (time.process_time() - c),
            "server_ms": 1e3 * (server_cpu(pg_root) - srv), "tx": counter.tx - tx,
            "stmts": counter.stmts - st}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--db", choices=["sqlite", "postgresql"], default="postgresql")
    a = ap.parse_args()
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from orchestrator.run.env import driver_defaults, prepare_trial_env

    driver_defaults()
    prepare_trial_env()
    import results_db
    from contract.reporter import MemoryReporter
    from orchestrator.run.driver.submit import jobs_for, register
    from orchestrator.run.trial.runner import execute_job
    from orchestrator.sweep.plan import make_plan
    from trainer.train import train

    tmp = Path(tempfile.mkdtemp(prefix="gs-ovh-"))
    pg = pg_root = None
    if a.db == "postgresql":
        from tests.support.pgtemp import start_pg_server

        pg = start_pg_server()
        url, pg_root = pg.url(), pg.root
    else:
        url = f"sqlite:///{tmp / 'results.db'}"
    try:
        f = tmp / "overhead.yaml"
        f.write_text(SWEEP.format(steps=a.steps, seeds=list(range(a.runs + 1))))
        plan = make_plan(f)
        with results_db.open(url) as db:
            rows = register(db, plan, force=False).to_run
        jobs = jobs_for(rows, plan, tmp / "storage", url)
        from tests.support.sqlcounter import SQLCounter

        counter = SQLCounter()
        # the first of each: imports, DeepSpeed's op build, the engine's first compilations
        train(jobs[0].spec, MemoryReporter(), tmp / "warm")
        execute_job(jobs[0])
        bare, ours = [], []
        for i, job in enumerate(jobs[1:]):
            bare.append(measure(lambda: train(job.spec, MemoryReporter(), tmp / "bare" / str(i)),
                                counter, pg_root))
            ours.append(measure(lambda: execute_job(job), counter, pg_root))
        report(a, bare, ours)
    finally:
        if pg is not None:
            from tests.support.pgtemp import stop_pg_server

            stop_pg_server(pg)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


def report(a: Any, bare: list[dict[str, float]], ours: list[dict[str, float]]) -> None:
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"\n{time.strftime('%Y-%m-%d %H:%M %Z')}, {platform.node()}, {os.cpu_count()} CPUs, "
          f"load {load}; {len(ours)} trials of tiny x {a.steps} steps, {a.db}")
    print(f"{'per trial':<28}{'bare train':>12}{'execute_job':>13}{'extra':>10}")
    for key in ("wall_ms", "cpu_ms", "server_ms", "tx", "stmts"):
        # the server's CPU counts in clock ticks (10 ms): its mean, the rest's median
        avg = statistics.fmean if key == "server_ms" else statistics.median
        b, o = avg(r[key] for r in bare), avg(r[key] for r in ours)
        label = f"{key} ({'mean' if key == 'server_ms' else 'median'})"
        print(f"{label:<28}{b:>12.1f}{o:>13.1f}{o - b:>10.1f}")


if __name__ == "__main__":
    main()
