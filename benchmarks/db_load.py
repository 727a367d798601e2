"""The DB load test as a benchmark: N concurrent simulated trials (processes) each writing M
metric points into SQLite and into a throwaway PostgreSQL server; prints throughput and
checks that nothing was lost.

    python benchmarks/db_load.py                      # 50 trials x 1000 points, both backends
    python benchmarks/db_load.py --trials 20 --points 5000 --backends sqlite
    python benchmarks/db_load.py --pg-url postgresql+psycopg://user@host/db   # your server
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # repo root: tests.support

import results_db
from tests.support.loadgen import run_load


def _count(url: str) -> tuple[int, int]:
    """(metric rows, succeeded runs) through the results_db API (no SQL here)."""
    with results_db.open(url) as db:
        rows = db.row_counts()["metrics"]
        ok = db.sweep_status()["succeeded"].sum()
    return int(rows), int(ok)


def bench(label: str, url: str, trials: int, points: int, batch: int) -> None:
    res = run_load(url, trials, points, batch)
    rows, ok = _count(url)
    lost = trials * points - rows
    print(f"| {label} | {trials} | {points} | {batch} | {res.wall_s:.1f} | {res.write_s:.2f} | "
          f"{res.rows_per_s:,.0f} | {lost} | {len(res.errors)} | {ok}/{trials} |")
    for e in res.errors[:3]:
        print(e)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100, help="points per log_metrics call")
    ap.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    ap.add_argument("--pg-url", help="use this (empty) PostgreSQL DB instead of a temp server")
    args = ap.parse_args()
    print(f"# results_db load  {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.machine()}")
    print("\n| backend | trials | points/trial | batch | wall (s) | write phase (s) | "
          "rows/s (write phase) | rows lost | errors | succeeded |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    tmp = Path(tempfile.mkdtemp(prefix="gs-dbload-"))
    try:
        if "sqlite" in args.backends:
            bench("sqlite (WAL)", f"sqlite:///{tmp / 'load.db'}", args.trials, args.points,
                  args.batch)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if "postgres" in args.backends:
        if args.pg_url:
            bench("postgresql", args.pg_url, args.trials, args.points, args.batch)
            return
        from tests.support.pgtemp import find_pg_bin, start_pg_server, stop_pg_server

        if find_pg_bin() is None:
            print("| postgresql | skipped: no initdb (apt-get install -y postgresql) |")
            return
        server = start_pg_server()
        try:
            server.admin("CREATE DATABASE load")
            bench("postgresql 15 (fsync off)", server.url("load"), args.trials, args.points,
                  args.batch)
        finally:
            stop_pg_server(server)


if __name__ == "__main__":
    main()
