"""Results-DB ingest and ranking speed on SQLite.

    python benchmarks/db_ingest.py                 # 10k runs x 1k points (~3-5 min on 2 cores)
    python benchmarks/db_ingest.py --runs 1000     # quicker
    python benchmarks/db_ingest.py --db sqlite:///big.db --reuse   # re-time an existing DB

Prints (1) metric rows/s of batched ``log_metrics`` (target >= 100k rows/s) at several batch
sizes, (2) the time to fill a DB with N runs x M points (tests.support.synth.fill: runs
registered by the submit path, attempts through the writer API), (3) leaderboard / ablation_table /
view query times over that DB
(target: leaderboard < 1 s over 10k runs x 1k metric points). Everything goes through the
real API; the DB file lives in a temp dir unless --db is given.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # repo root: tests.support

from timing import timed  # benchmarks/timing.py (scripts run from benchmarks/)

import results_db
from tests.support.synth import add_finished_run, fill


def ingest_rate(url: str, batch: int, total: int = 200_000) -> float:
    """Rows/s of log_metrics into one run, ``batch`` points per call (idempotent upsert)."""
    with results_db.open(url) as db:
        sid = db.ensure_sweep("ingest")
        rid = add_finished_run(db, sid, "baseline")
        att = None  # points may come without an attempt (backfill)
        names = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s")
        pts = [(i // 4, names[i % 4], 1.0 / (i + 1)) for i in range(total)]
        t0 = time.perf_counter()
        for i in range(0, total, batch):
            db.log_metrics(rid, att, pts[i:i + batch])
        return total / (time.perf_counter() - t0)


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="gs-dbbench-"))
    try:
        run(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(tmp: Path) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="SQLite URL for the big DB (default: a temp file)")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--reuse", action="store_true", help="do not fill: time an existing DB")
    args = ap.parse_args()
    print(f"# results_db ingest benchmark  {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  "
          f"{platform.machine()} {platform.python_version()}")
    print("\n| batch (points/call) | rows/s |\n|---:|---:|")
    for batch in (100, 1000, 10_000):
        rate = ingest_rate(f"sqlite:///{tmp / f'ingest-{batch}.db'}", batch)
        print(f"| {batch} | {rate:,.0f} |")
    url = args.db or f"sqlite:///{tmp / 'big.db'}"
    if not args.reuse:
        stats = fill(results_db.open(url), runs=args.runs, points=args.points,
                     lrs=(1e-3, 3e-3, 1e-2))
        print(f"\nfill {stats['runs']} runs x {args.points} points through the writer API: "
              f"{stats['total_s']:.1f} s total, log_metrics {stats['metric_rows_per_s']:,.0f} "
              "rows/s")
    with results_db.open(url) as db:
        counts = db.row_counts()
        n_runs, n_rows = counts["runs"], counts["metrics"]
        print(f"\nDB: {n_runs:,} runs, {n_rows:,} metric rows\n")
        print("| query | first (s) | median of 5 (s) |\n|---|---:|---:|")
        sweep = db.sweeps()["name"][0]
        run_ids = db.runs(sweep=sweep)["id"].head(20).to_list()
        for label, fn in (
                ("db.leaderboard(sweep)", lambda: db.leaderboard(sweep)),
                ("db.ablation_table(sweep)", lambda: db.ablation_table(sweep)),
                ("db.max_stable_lr(sweep)", lambda: db.max_stable_lr(sweep)),
                ("db.view('leaderboard') (the raw SQL view)", lambda: db.view("leaderboard")),
                ("db.sweep_status()", db.sweep_status),
                ("db.metrics(20 runs, max_points=500)",
                 lambda: db.metrics(run_ids, ["train/loss"], max_points=500))):
            first, med, _ = timed(fn)
            print(f"| {label} | {first:.3f} | {med:.3f} |")


if __name__ == "__main__":
    main()
