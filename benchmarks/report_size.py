"""Size and time of `orchestrator report` (a 57-run sweep's report < 5 MB, < 10 s).

    python benchmarks/report_size.py [--seeds 3,27] [--repeats 2] [--dir /tmp/gatesweep-report]

For each seed count, the gates-toy sweep (sweeps/gates.yaml: 19 seed groups) is registered by
the real submit path with every run succeeded, its curves, summaries and one provenance document
per attempt (tests.support.report_db, mixed: one variant on another commit): 3 seeds = the
57-run sweep, 27 seeds = 513 runs. Then `orchestrator report` is timed end to end (the CLI, the
child `python -m dashboard.report`, the output writer) for HTML and Markdown, once with the
Vega bundle cache cold (a fresh XDG_CACHE_HOME: vl-convert builds the bundle, ~2 s) and then
warm, and the files' sizes are printed. Prints one table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # repo root: tests.support (synthetic DBs)
LIMIT_MB, LIMIT_S = 5.0, 10.0  # the stated bound (docs/benchmarks.md), for the 57-run sweep


def build(work: Path, seeds: int) -> str:
    from tests.support import report_db

    path = work / f"gates-{seeds}.db"
    if not path.exists():
        t = time.perf_counter()
        report_db.build(f"sqlite:///{path}", mixed=True, seeds=seeds)
        print(f"built {path} ({seeds} seeds) in {time.perf_counter() - t:.1f} s", flush=True)
    return f"sqlite:///{path}"


def timed_report(url: str, out: Path, fmt: str, cache: Path) -> tuple[float, int]:
    """Seconds of one `orchestrator report` and the bytes it wrote (figures included)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    figures = out.with_name(out.stem + "_files")
    shutil.rmtree(figures, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "orchestrator", "report", "gates-toy", "--db", url,
                    "--out", str(out), "--format", fmt], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    size = out.stat().st_size + sum(p.stat().st_size for p in figures.glob("*"))
    return dt, size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", default="3,27")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/gatesweep-report-bench"))
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"{platform.node()} {platform.processor() or platform.machine()} "
          f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}", flush=True)
    rows, ok = [], True
    for seeds in (int(s) for s in args.seeds.split(",")):
        url = build(args.dir, seeds)
        runs = 19 * seeds
        for fmt, ext in (("html", "html"), ("markdown", "md")):
            out = args.dir / f"report-{seeds}.{ext}"
            cache = args.dir / f"cache-{seeds}-{fmt}"
            shutil.rmtree(cache, ignore_errors=True)
            cold, size = timed_report(url, out, fmt, cache)
            warm = min(timed_report(url, out, fmt, cache)[0] for _ in range(args.repeats))
            rows.append((runs, fmt, size / 2**20, cold, warm))
            if runs <= 57:
                ok = ok and size / 2**20 < LIMIT_MB and warm < LIMIT_S
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print("| runs | format | size MiB | cold s (bundle built) | warm s |")
    print("|---:|---|---:|---:|---:|")
    for runs, fmt, mb, cold, warm in rows:
        print(f"| {runs} | {fmt} | {mb:.2f} | {cold:.1f} | {warm:.1f} |")
    print(f"57-run bound (< {LIMIT_MB:g} MB, < {LIMIT_S:g} s warm): {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
