"""Concurrent simulated trials against one results DB (the DB load test, db_load benchmark).

Each trial is a process doing what a real trial does through the writer API: ensure_sweep
(the same sweep in every process), register its run, start_attempt -- then all trials wait at
a barrier and write at once: ``points`` metric points flushed in batches of ``batch`` with a
heartbeat per flush, summaries, finish_attempt. The write phase is timed separately from
process start-up (which on 2 cores dominates the wall time of 50 processes).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

from tests.support.procs import RESULT_TIMEOUT_S, clean_context

SWEEP = "load"


def simulate_trial(url: str, index: int, points: int, batch: int, barrier: Any,
                   out: Any) -> None:
    """One trial; puts (index, error text or None, write start, write end) on ``out``."""
    import results_db
    from tests.support.synth import gate_config

    t0 = t1 = 0.0
    try:
        with results_db.open(url, migrate=False) as db:
            sid = db.ensure_sweep(SWEEP, "# load test")
            name = f"trial-{index}"
            run = db.register_runs(sid, [results_db.NewRun(
                name, f"{SWEEP}:{name}", "baseline", index, gate_config(seed=index))]).to_run[0]
            att = db.start_attempt(run.id, host="load")
            names = ("train/loss", "train/lr")
            pts = [(i // 2, names[i % 2], 1.0 / (i + 1)) for i in range(points)]
            barrier.wait(timeout=300)
            t0 = time.time()
            for i in range(0, points, batch):
                db.log_metrics(run.id, att.id, pts[i:i + batch])
                db.heartbeat(att.id)
            db.log_summaries(run.id, att.id, {"val/loss": 1.0, "val/ppl": 2.718})
            db.finish_attempt(att.id, "succeeded")
            t1 = time.time()
        out.put((index, None, t0, t1))
    except Exception:  # noqa: BLE001 -- reported to the parent, which fails loudly
        barrier.abort()
        out.put((index, f"trial {index}: {traceback.format_exc()}", t0, t1))


@dataclass(frozen=True)
class LoadResult:
    trials: int
    points: int
    wall_s: float  # whole run, process start-up included
    write_s: float  # first write start -> last trial end, all trials writing at once
    errors: list[str]

    @property
    def rows_per_s(self) -> float:
        return self.trials * self.points / max(self.write_s, 1e-9)


def run_load(url: str, trials: int = 50, points: int = 1000, batch: int = 100) -> LoadResult:
    """``trials`` processes at once, forked from a clean server (tests/support/procs.py)."""
    import results_db

    results_db.open(url).close()  # migrate once, before the crowd arrives
    ctx = clean_context(__name__)
    barrier, out = ctx.Barrier(trials), ctx.Queue()
    t0 = time.perf_counter()
    procs = [ctx.Process(target=simulate_trial, args=(url, i, points, batch, barrier, out))
             for i in range(trials)]
    for p in procs:
        p.start()
    results = [out.get(timeout=RESULT_TIMEOUT_S) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    wall = time.perf_counter() - t0
    errors = [r[1] for r in results if r[1]]
    starts = [r[2] for r in results if not r[1]]
    ends = [r[3] for r in results if not r[1]]
    write = (max(ends) - min(starts)) if starts else 0.0
    if len(results) < trials:
        errors.append(f"only {len(results)} of {trials} trials reported")
    return LoadResult(trials, points, wall, write, errors)
