"""Dashboard render time on a big results DB (issue 4: < 2 s for leaderboard and ablation).

    python benchmarks/dashboard_render.py [--db sqlite:////tmp/gatesweep-dash-bench.db]
        [--runs 10000] [--points 1000] [--repeats 3]

Fills the DB first when it has fewer runs than asked (results_db.synth.fill: the real writer
API; 10k runs x 1k points = 10M metric rows takes a few minutes here), then times, with
streamlit's AppTest (script run + every element serialised, no browser):
  cold = st.cache_data cleared (every DB query runs), warm = cached (a widget change),
for the leaderboard, the three ablation tables and the curves page (100 runs, downsampled),
and the data functions alone. Prints one table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "dashboard" / "app.py")
TARGET_S = 2.0


def ensure_db(url: str, runs: int, points: int) -> str:
    """The synth sweep's name; generates it through the writer API when missing or short."""
    import results_db
    from results_db import synth

    db = results_db.open(url)
    have = db.query("SELECT COUNT(*) AS n FROM runs")["n"][0]
    if have < runs:
        print(f"filling {url}: {runs} runs x {points} points (writer API) ...", flush=True)
        t = time.perf_counter()
        stats = synth.fill(db, runs=runs, points=points, sweep="synth")
        print(f"  done in {time.perf_counter() - t:.0f} s ({stats['metric_rows_per_s']:.0f} "
              "metric rows/s)", flush=True)
    n_metrics = db.query("SELECT COUNT(*) AS n FROM metrics")["n"][0]
    n_runs = db.query("SELECT COUNT(*) AS n FROM runs")["n"][0]
    print(f"DB: {n_runs} runs, {n_metrics} metric rows", flush=True)
    db.close()
    return "synth"


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(median s, max s) over ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), max(times)


def page_runner(page: str, sweep: str, setup: Callable | None = None, cold: bool = True):
    """A callable that renders ``page`` once with AppTest (cache cleared first when cold)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["page"] = page
    at.query_params["sweep"] = sweep
    at.run()
    _check(at, page)
    if setup is not None:
        setup(at)
        _check(at, page)

    def render() -> None:
        if cold:
            st.cache_data.clear()
        at.run()
        _check(at, page)

    return render


def _check(at: object, page: str) -> None:
    if at.exception:  # type: ignore[attr-defined]
        raise RuntimeError(f"{page}: {[e.value for e in at.exception]}")  # type: ignore


def _kind(kind: str) -> Callable:
    return lambda at: at.radio(key="ab_kind").set_value(kind).run()


def _hundred_runs(at: object) -> None:
    ms = at.multiselect(key="cv_runs")  # type: ignore[attr-defined]
    ms.set_value(list(ms.options_values if hasattr(ms, "options_values") else [])).run()


def data_rows(url: str, sweep: str, repeats: int) -> list[tuple[str, float, float]]:
    """The DB reads and table builds without Streamlit."""
    import results_db
    from dashboard import ablation, tables

    db = results_db.open(url)
    runs = db.runs(sweep=sweep).drop("config")
    summ = db.summaries(sweep=sweep).select("run_id", "name", "value")
    ids = runs["id"].head(100).to_list()
    rows = [
        ("db.runs(sweep)", *timed(lambda: db.runs(sweep=sweep), repeats)),
        ("db.summaries(sweep)", *timed(lambda: db.summaries(sweep=sweep), repeats)),
        ("leaderboard frame (polars)", *timed(lambda: tables.leaderboard(runs, summ), repeats)),
        ("ablation quality frame", *timed(lambda: ablation.build("quality", runs, summ,
                                                                 with_paper=True), repeats)),
        ("db.metrics(100 runs, 3 names, max_points=1000)",
         *timed(lambda: db.metrics(ids, ["train/loss", "train/lr", "train/grad_norm"], 1000),
                repeats)),
    ]
    db.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="sqlite:////tmp/gatesweep-dash-bench.db")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sweep = ensure_db(args.db, args.runs, args.points)
    os.environ["GATESWEEP_DB"] = args.db
    rows = data_rows(args.db, sweep, args.repeats)
    pages = [("Leaderboard", "Leaderboard", None), ("Ablation: quality", "Ablation tables", None),
             ("Ablation: probes", "Ablation tables", _kind("probes")),
             ("Ablation: stability", "Ablation tables", _kind("stability")),
             ("Curves (6 runs)", "Curves", None)]
    for label, page, setup in pages:
        for cold in (True, False):
            run = page_runner(page, sweep, setup, cold)
            rows.append((f"page {label} [{'cold' if cold else 'warm'}]",
                         *timed(run, args.repeats)))
    _print(rows, args)
    slow = [r for r in rows if r[0].startswith("page ") and "Curves" not in r[0]
            and r[1] > TARGET_S]
    return 1 if slow else 0


def _print(rows: list[tuple[str, float, float]], args: argparse.Namespace) -> None:
    print(f"\n{time.strftime('%Y-%m-%d')} {platform.node()} {platform.machine()} "
          f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"{args.runs} runs x {args.points} points; median/max of {args.repeats}")
    print(f"| {'what':58} | median s | max s | < {TARGET_S:g} s |")
    print(f"| {'-' * 58} | -------- | ----- | ----- |")
    for name, med, worst in rows:
        ok = "yes" if med < TARGET_S else "NO"
        print(f"| {name:58} | {med:8.3f} | {worst:5.3f} | {ok:5} |")


if __name__ == "__main__":
    raise SystemExit(main())
