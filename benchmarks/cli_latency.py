"""How fast the CLI answers: `--help`, an error path, `validate` of the smoke sweep and of a
5,000-run grid, each as a fresh process (what a user waits for), median of N runs.

    python benchmarks/cli_latency.py [--repeat 5] [--before docs-numbers]

Issue 12's targets: --help and every error path < 0.5 s; validate smoke < 2 s; validate of a
5,000-run file < 5 s. The "before" column is what the same commands took before issue 12
(measured on this machine kind with this script's commands; docs/benchmarks.md), so the
ratio is printed side by side. Timings are data, never asserted by a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Seconds measured before issue 12 (2026-11-30, 2-core CPU machine, load ~1-3).
BEFORE = {"--help": 2.7, "error: 4-line file": 2.96, "validate smoke.yaml": 7.9,
          "validate 5,000 runs": 24.0}
TARGET = {"--help": 0.5, "error: 4-line file": 0.5, "validate smoke.yaml": 2.0,
          "validate 5,000 runs": 5.0}

GRID = """name: grid5k
base:
  model: {preset: tiny}
  train: {steps: 100, lr: 3.0e-3}
variants:
  baseline: {}
  g1: {gate.position: G1}
  g1_head: {gate.position: G1, gate.granularity: headwise}
  g2: {gate.position: G2}
  g3: {gate.position: G3}
axes:
  train.warmup: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
lr_ladder: {min: 1.0e-4, max: 1.0e-2, steps: 10}
seeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
"""
BAD = "name: x\nbase: {model: {preset: tiny}, train: {steps: yes}}\nvariants: {a: {}}\nfoo: 1\n"


def time_cmd(args: list[str], repeat: int, expect: int) -> float:
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "RAY_AUTH_MODE": "disabled"}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], env=env,
                              capture_output=True, text=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        if proc.returncode != expect:
            raise SystemExit(f"{args}: exit {proc.returncode}, expected {expect}\n"
                             f"{proc.stderr[-2000:]}")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        grid, bad = Path(tmp) / "grid5k.yaml", Path(tmp) / "bad.yaml"
        grid.write_text(GRID)
        bad.write_text(BAD)
        db = f"sqlite:///{tmp}/none.db"  # never created: validate is read-only
        cases = {"--help": (["--help"], 0),
                 "error: 4-line file": (["validate", str(bad), "--db", db], 2),
                 "validate smoke.yaml": (["validate", "sweeps/smoke.yaml", "--db", db], 0),
                 "validate 5,000 runs": (["validate", str(grid), "--db", db], 0)}
        print(f"{'command':<22} {'before s':>9} {'now s':>7} {'speed-up':>9} {'target s':>9}")
        for name, (argv, code) in cases.items():
            now = time_cmd(argv, args.repeat, code)
            print(f"{name:<22} {BEFORE[name]:>9.2f} {now:>7.2f} {BEFORE[name] / now:>8.1f}x "
                  f"{TARGET[name]:>9.1f}")
        assert not Path(f"{tmp}/none.db").exists(), "validate created a DB"
    print(f"(median of {args.repeat} fresh processes; load average "
          f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
