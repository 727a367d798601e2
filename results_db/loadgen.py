"""Concurrent simulated trials against one results DB (issue 6 load test, db_load benchmark).

Each trial is a process doing what a real trial does through the writer API: ensure_sweep
(the same sweep in every process), register its run, start_attempt, then ``points`` metric
points flushed in batches of ``batch`` with a heartbeat per flush, summaries, finish_attempt.
"""

from __future__ import annotations

import multiprocessing as mp
import time
import traceback
from dataclasses import dataclass

SWEEP = "load"


def simulate_trial(url: str, index: int, points: int, batch: int) -> str | None:
    """One trial; returns None, or the error text (exceptions must not vanish in a child)."""
    import results_db
    from results_db.synth import gate_config

    try:
        with results_db.open(url) as db:
            sid = db.ensure_sweep(SWEEP, "# load test")
            name = f"trial-{index}"
            run = db.register_runs(sid, [results_db.NewRun(
                name, f"{SWEEP}:{name}", "baseline", index, gate_config(seed=index))]).to_run[0]
            att = db.start_attempt(run.id, host="load")
            names = ("train/loss", "train/lr")
            pts = [(i // 2, names[i % 2], 1.0 / (i + 1)) for i in range(points)]
            for i in range(0, points, batch):
                db.log_metrics(run.id, att.id, pts[i:i + batch])
                db.heartbeat(att.id)
            db.log_summaries(run.id, att.id, {"val/loss": 1.0, "val/ppl": 2.718})
            db.finish_attempt(att.id, "succeeded")
        return None
    except Exception:  # noqa: BLE001 -- reported to the parent, which fails loudly
        return f"trial {index}: {traceback.format_exc()}"


@dataclass(frozen=True)
class LoadResult:
    trials: int
    points: int
    wall_s: float
    errors: list[str]

    @property
    def rows_per_s(self) -> float:
        return self.trials * self.points / self.wall_s


def _child(args: tuple[str, int, int, int]) -> str | None:
    return simulate_trial(*args)


def run_load(url: str, trials: int = 50, points: int = 1000, batch: int = 100) -> LoadResult:
    """``trials`` processes at once (fork: cheap on 2 cores; no engine exists before fork)."""
    import results_db

    results_db.open(url).close()  # migrate once, before the crowd arrives
    ctx = mp.get_context("fork")
    t0 = time.perf_counter()
    with ctx.Pool(trials) as pool:
        errors = [e for e in pool.map(_child, [(url, i, points, batch) for i in range(trials)])
                  if e]
    return LoadResult(trials, points, time.perf_counter() - t0, errors)
