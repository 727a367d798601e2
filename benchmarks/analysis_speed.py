"""Results-analysis speed: the vectorised results_db/analysis against the per-group Python
path it replaced, side by side in one run, on one results DB (targets:
leaderboard, effects, stability <= 0.3 s and a 6-metric ablation table <= 1 s on 10k runs).

    python benchmarks/analysis_speed.py                       # fills a 10k-run DB in a temp dir
    python benchmarks/analysis_speed.py --db sqlite:////tmp/a10k.db     # reuse/fill this DB
    python benchmarks/analysis_speed.py --runs 2000 --repeat 3           # quicker

The DB is a tests.support.synth.fill sweep (10 variants x 3 LRs x 3 seeds, repeated: 10k runs =
3,334 seed groups, 1,112 LR ladders; a few metric points per run, which the analysis never
reads), filled when it has fewer runs than asked: runs registered by the submit path
(make_plan + register, real RunSpecs and fingerprints), attempts through the writer API.

"before" is the analysis package and its reads (then results_db/frames.py) as of ``--before``
(default: the last commit with the per-group Python path), extracted with ``git show`` into
a temp dir and run against the same DB; without git (or with ``--no-before``) that column
reads n/a. The benchmark also checks that both paths return the same verdicts.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # repo root: tests.support

from timing import timed  # benchmarks/timing.py (scripts run from benchmarks/)

import results_db
from tests.support.synth import fill

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "ccadd70"  # results_db/analysis with per-group Python CIs
OLD_PKG = "analysis_before"
FILES = ("__init__", "api", "baseline", "compare", "effects", "stability", "stats",
         "summary", "table", "verdict")
TARGETS = {"leaderboard": 0.3, "effects": 0.3, "stability": 0.3, "max_stable_lr": 0.3,
           "ablation_table (6 metrics)": 1.0, "findings": None}


def load_before(commit: str, tmp: Path) -> Any | None:
    """The analysis package at ``commit`` as module ``analysis_before.api`` (imports
    rewritten to the copy), or None when git cannot show it."""
    pkg = tmp / OLD_PKG
    pkg.mkdir()
    for name in (*FILES, "frames"):
        path = "results_db/frames.py" if name == "frames" else f"results_db/analysis/{name}.py"
        try:
            text = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        text = text.replace("results_db.analysis", OLD_PKG).replace("results_db.vocab",
                                                                     "results_db.schema.vocab")
        (pkg / f"{name}.py").write_text(text.replace("results_db.frames", f"{OLD_PKG}.frames"))
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module(f"{OLD_PKG}.api")
    except ImportError as exc:  # the old code needs names the tree no longer has
        print(f"before: cannot import the analysis of {commit} ({exc}); column n/a")
        return None


class _Old:
    """The old AnalysisMixin over this DB's reads (it only uses ``reader`` and ``runs``)."""

    def __init__(self, api: Any, db: Any) -> None:
        self.mixin = type("OldDB", (api.AnalysisMixin,), {})()
        self.mixin.reader = db.reader
        self.mixin.runs = db.runs


def calls(db: Any, sweep: str) -> dict[str, Callable[[], Any]]:
    out = {"leaderboard": lambda: db.leaderboard(sweep),
           "effects": lambda: db.effects(sweep),
           "stability": lambda: db.stability(sweep),
           "max_stable_lr": lambda: db.max_stable_lr(sweep),
           "ablation_table (6 metrics)": lambda: db.ablation_table(sweep)}
    if hasattr(db, "findings"):  # the old analysis path has none
        out["findings"] = lambda: db.findings(sweep)
    return out


def same_verdicts(new: Any, old: Any) -> str:
    """'yes' when both leaderboards hold the same (variant, lr, verdict, ci_method) rows."""
    cols = ["variant", "lr", "verdict", "ci_method", "n", "seeds_needed"]
    a = new.select(cols).sort("variant", "lr")
    b = old.select(cols).sort("variant", "lr")
    return "yes" if a.equals(b) else "NO"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="SQLite URL (default: a temp file, filled)")
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before", default=BEFORE, help="git commit of the old analysis path")
    ap.add_argument("--no-before", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gs-analysis-"))
    try:
        run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(args: argparse.Namespace, tmp: Path) -> None:
    url = args.db or f"sqlite:///{tmp / 'analysis.db'}"
    print(f"# results analysis speed  {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  "
          f"{platform.machine()} {platform.python_version()}")
    with results_db.open(url) as db:
        have = db.sweep_status("synth")
        if have.height == 0 or have["total"][0] < args.runs:
            fill(db, runs=args.runs, points=3, lrs=(1e-3, 3e-3, 1e-2))
    old_api = None if args.no_before else load_before(args.before, tmp)
    with results_db.open(url, readonly=True) as db:
        status = db.sweep_status("synth")
        lb = db.leaderboard("synth")
        print(f"\nDB: sweep synth, {status['total'][0]:,} runs, {lb.height:,} seed groups; "
              f"before = {args.before if old_api else 'n/a'}; seconds, first call / median "
              f"of {args.repeat}\n")
        print("| call | before first | before median | after first | after median | "
              "speed-up (median) | target |\n|---|---:|---:|---:|---:|---:|---:|")
        new = calls(db, "synth")
        old = calls(_Old(old_api, db).mixin, "synth") if old_api else {}
        results = {}
        for name, fn in new.items():
            first, med, results[name] = timed(fn, args.repeat)
            if name in old:
                ofirst, omed, results[f"old {name}"] = timed(old[name], args.repeat)
                before = f"{ofirst:.3f} | {omed:.3f}"
                ratio = f"{omed / med:.1f}x"
            else:
                before, ratio = "n/a | n/a", "n/a"
            target = TARGETS.get(name)
            print(f"| `db.{name}` | {before} | {first:.3f} | {med:.3f} | {ratio} | "
                  f"{'' if target is None else f'<= {target} s'} |")
        if old_api:
            print(f"\nsame verdicts, CI methods and seeds_needed as before: "
                  f"{same_verdicts(results['leaderboard'], results['old leaderboard'])}")


if __name__ == "__main__":
    main()
