"""Dashboard render time on a big results DB (< 2 s for leaderboard and ablation).

    python benchmarks/dashboard_render.py [--db sqlite:////tmp/gatesweep-dash-bench.db]
        [--runs 10000] [--points 1000] [--repeats 3] [--curve-runs 100 --curve-steps 100000]
        [--only-curves] [--toy]

Fills the DB first when it has fewer runs than asked (tests.support.synth.fill: runs registered
by the submit path, attempts through the real writer API; 10k runs x 1k points = 10M metric rows
takes a few minutes here), then times, with
streamlit's AppTest (script run + every element serialised, no browser):
  cold = st.cache_data cleared (every DB query runs), warm = cached (a widget change),
for the leaderboard, the ablation tables and the curves page (100 runs, downsampled; and 100
runs x 100k steps of train/loss from tests.support.synth.fill_curves, sweep ``synth-curves``), and
the data functions alone. Prints one table; the figures go to docs/benchmarks.md.
``--toy``: the render budget on the 57-run gates-toy sweep instead (Leaderboard and Curves).
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
sys.path.insert(0, str(ROOT))  # repo root: tests.support (synthetic DBs)
APP = str(ROOT / "dashboard" / "app.py")
TARGET_S = 2.0  # cold page
WARM_S = 1.0  # warm page


def ensure_db(url: str, runs: int, points: int, sweep: str = "synth") -> str:
    """Generates ``sweep`` through the writer API when it is missing or short."""
    import results_db
    from tests.support import synth

    db = results_db.open(url)
    have = db.runs(sweep=sweep, with_config=False, columns=["id"]).height
    if have < runs:
        print(f"filling {url} {sweep}: {runs} runs x {points} points (writer API) ...",
              flush=True)
        t = time.perf_counter()
        stats = synth.fill(db, runs=runs, points=points, sweep=sweep)
        print(f"  done in {time.perf_counter() - t:.0f} s ({stats['metric_rows_per_s']:.0f} "
              "metric rows/s)", flush=True)
    n_runs = db.runs(with_config=False, columns=["id"]).height
    print(f"DB: {n_runs} runs", flush=True)
    db.close()
    return sweep


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


def _pick_runs(ids: list[int]) -> Callable:
    return lambda at: at.multiselect(key="cv_runs").set_value(ids).run()


def _run_ids(url: str, sweep: str) -> list[int]:
    import results_db

    with results_db.open(url) as db:
        return db.runs(sweep=sweep, with_config=False, columns=["id"])["id"].to_list()


def data_rows(url: str, sweep: str, repeats: int) -> list[tuple[str, float, float]]:
    """The DB reads behind the pages (cache cleared before each), without a script run."""
    import streamlit as st

    import results_db
    from dashboard import data

    db = results_db.open(url, readonly=True)

    def cold(fn: Callable[[], object]) -> Callable[[], object]:
        return lambda: (st.cache_data.clear(), fn())

    ids = data.runs(url, sweep)["id"].head(100).to_list()
    names = ["train/loss", "train/lr", "train/grad_norm"]
    rows = [
        ("data.runs (db.runs, no config, 22 columns)",
         *timed(cold(lambda: data.runs(url, sweep)), repeats)),
        ("data.summary_names(sweep)", *timed(cold(lambda: data.summary_names(url, sweep)),
                                             repeats)),
        ("db.leaderboard(sweep) (CIs, verdicts)", *timed(lambda: db.leaderboard(sweep), repeats)),
        ("db.findings(sweep)", *timed(lambda: db.findings(sweep), repeats)),
        ("db.effects(sweep)", *timed(lambda: db.effects(sweep), repeats)),
        ("db.ablation_table(sweep, quality metrics)",
         *timed(lambda: db.ablation_table(sweep, ["val/ppl"]), repeats)),
        ("db.metrics(100 runs, 3 names, max_points=1000)",
         *timed(lambda: db.metrics(ids, names, 1000), repeats)),
    ]
    db.close()
    return rows


def ensure_curves(url: str, runs: int, steps: int, sweep: str = "synth-curves") -> str:
    """``runs`` x ``steps`` points of train/loss (tests.support.synth.fill_curves) when missing."""
    import results_db
    from tests.support import synth

    with results_db.open(url) as db:
        if db.runs(sweep=sweep, with_config=False, columns=["id"]).height < runs:
            print(f"filling {url} {sweep}: {runs} runs x {steps} steps (writer API) ...",
                  flush=True)
            print(f"  {synth.fill_curves(db, runs=runs, steps=steps, sweep=sweep)}", flush=True)
    return sweep


def curve_rows(url: str, sweep: str, repeats: int) -> list[tuple[str, float, float]]:
    """The curves page's DB read for every run of ``sweep`` (cache cleared), and the page."""
    import streamlit as st

    from dashboard import data

    ids = tuple(_run_ids(url, sweep)[:100])
    read = timed(lambda: (st.cache_data.clear(),
                          data.metrics(url, ids, ("train/loss",), 1000)), repeats)
    rows = [(f"data.metrics({len(ids)} runs x long train/loss, 1000 pts)", *read)]
    for cold in (True, False):
        run = page_runner("Curves", sweep, _pick_runs(list(ids)), cold)
        rows.append((f"page Curves ({len(ids)} runs x long) [{'cold' if cold else 'warm'}]",
                     *timed(run, repeats)))
    return rows


# The render budget on the 57-run sweep a fresh clone's `make run` writes
TOY_BUDGET = {"Leaderboard": 1.5, "Curves": 2.5}


def toy(url: str, repeats: int) -> int:
    """Leaderboard and Curves (its default view: every run, train/loss and val/loss, the Δ
    curves) cold and warm on gates-toy; prints a table with the load average; exit 1 when a
    warm page is over its budget."""
    import results_db
    from tests.support import report_db

    with results_db.open(url) as db:
        have = db.runs(sweep=report_db.SWEEP, with_config=False, columns=["id"]).height
    if not have:
        report_db.build(url)
    rows = []
    for page in TOY_BUDGET:
        for cold in (True, False):
            run = page_runner(page, report_db.SWEEP, None, cold)
            rows.append((page, "cold" if cold else "warm", *timed(run, repeats)))
    load = os.getloadavg()
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} {platform.node()}, "
          f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"gates-toy, 57 runs; median/max of {repeats}")
    print("| page | cache | median s | max s | budget (warm) | met |")
    print("| --- | --- | ---: | ---: | --- | --- |")
    over = False
    for page, cache, med, worst in rows:
        budget = TOY_BUDGET[page]
        ok = cache == "cold" or med <= budget
        over |= not ok
        print(f"| {page} | {cache} | {med:.3f} | {worst:.3f} | "
              f"{'<= ' + format(budget, 'g') + ' s' if cache == 'warm' else '–'} | "
              f"{'yes' if ok else 'NO'} |")
    return 1 if over else 0


def main() -> int:
    os.environ.setdefault("STREAMLIT_LOGGER_LEVEL", "error")  # bare-mode warnings per run
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="sqlite:////tmp/gatesweep-dash-bench.db")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--points", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--curve-runs", type=int, default=100,
                    help="runs of --curve-steps train/loss points (downsampling check)")
    ap.add_argument("--curve-steps", type=int, default=100_000)
    ap.add_argument("--only-curves", action="store_true", help="time only the long curves")
    ap.add_argument("--toy", action="store_true",
                    help="the render budget on the 57-run gates-toy sweep instead "
                    "(tests.support.report_db, written to --db when it has no such sweep): "
                    f"Leaderboard warm <= {TOY_BUDGET['Leaderboard']} s, Curves warm <= "
                    f"{TOY_BUDGET['Curves']} s")
    args = ap.parse_args()
    os.environ["GATESWEEP_DB"] = args.db
    if args.toy:
        return toy(args.db, args.repeats)
    curves = ensure_curves(args.db, args.curve_runs, args.curve_steps)
    rows = [] if args.only_curves else _table_rows(args)
    rows += curve_rows(args.db, curves, args.repeats)
    _print(rows, args)
    slow = [r for r in rows if r[0].startswith("page ")
            and r[1] > (WARM_S if "[warm]" in r[0] else TARGET_S)]
    return 1 if slow else 0


def _table_rows(args: argparse.Namespace) -> list[tuple[str, float, float]]:
    sweep = ensure_db(args.db, args.runs, args.points)
    rows = data_rows(args.db, sweep, args.repeats)
    pages = [("Overview", "Overview", None), ("Leaderboard", "Leaderboard", None),
             ("Probes", "Probes", None), ("Run detail", "Run detail", None),
             ("Ablation: quality", "Ablation tables", None),
             ("Ablation: probes", "Ablation tables", _kind("probes")),
             ("Ablation: stability", "Ablation tables", _kind("stability")),
             ("Ablation: long context", "Ablation tables", _kind("longctx")),
             (f"Curves (100 runs x {args.points // 3} steps)", "Curves",
              _pick_runs(_run_ids(args.db, sweep)[:100]))]
    for label, page, setup in pages:
        for cold in (True, False):
            run = page_runner(page, sweep, setup, cold)
            rows.append((f"page {label} [{'cold' if cold else 'warm'}]",
                         *timed(run, args.repeats)))
    return rows


def _print(rows: list[tuple[str, float, float]], args: argparse.Namespace) -> None:
    print(f"\n{time.strftime('%Y-%m-%d')} {platform.node()} {platform.machine()} "
          f"{os.cpu_count()} cores, Python {sys.version.split()[0]}; "
          f"{args.runs} runs x {args.points} points; median/max of {args.repeats}")
    print(f"| {'what':58} | median s | max s | target | met |")
    print(f"| {'-' * 58} | -------- | ----- | ------ | --- |")
    for name, med, worst in rows:
        target = WARM_S if "[warm]" in name else TARGET_S
        ok = "yes" if med < target else "NO"
        print(f"| {name:58} | {med:8.3f} | {worst:5.3f} | < {target:g} s | {ok:3} |")


if __name__ == "__main__":
    raise SystemExit(main())
