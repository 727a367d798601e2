"""How fast the CLI answers: `--help`, an error path, `validate` of the smoke sweep and of a
5,000-run grid, each as a fresh process (what a user waits for), median of N runs.

    python benchmarks/cli_latency.py [--repeat 5] [--before-tree DIR]

Targets: --help and every error path < 0.5 s; validate smoke < 2 s; validate of a
5,000-run file < 5 s. ``--before-tree DIR``: a checkout of the code before the change (made
without touching the working tree: ``git archive a8440a1 | tar -x -C DIR``) run with the same
interpreter (PYTHONPATH=DIR), side by side. Wall time depends on the machine's load (shared
2-core machines), so the child's CPU time (user + sys) is printed too: it is what the command
costs. Timings are data, never asserted by a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def time_cmd(args: list[str], repeat: int, expect: int, tree: Path = ROOT
             ) -> tuple[float, float]:
    """(median wall s, median CPU s) of ``python -m orchestrator ARGS`` run from ``tree``."""
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "RAY_AUTH_MODE": "disabled",
           "PYTHONPATH": str(tree)}
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "orchestrator", *args], env=env,
                              capture_output=True, text=True, cwd=tree)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != expect:
            raise SystemExit(f"{args} in {tree}: exit {proc.returncode}, expected {expect}\n"
                             f"{proc.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--before-tree", type=Path, default=None,
                    help="code before the change (git archive REV | tar -x -C DIR)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        grid, bad = Path(tmp) / "grid5k.yaml", Path(tmp) / "bad.yaml"
        grid.write_text(GRID)
        bad.write_text(BAD)
        db = f"sqlite:///{tmp}/none.db"  # never created: validate is read-only
        smoke = str(ROOT / "sweeps" / "smoke.yaml")
        cases = {"--help": (["--help"], 0),
                 "error: 4-line file": (["validate", str(bad), "--db", db], 2),
                 "validate smoke.yaml": (["validate", smoke, "--db", db], 0),
                 "validate 5,000 runs": (["validate", str(grid), "--db", db], 0)}
        print(f"{'command':<22} {'target':>7} {'wall s':>7} {'cpu s':>7}"
              + (f" {'before wall':>12} {'before cpu':>11} {'cpu ratio':>10}"
                 if args.before_tree else ""))
        for name, (argv, code) in cases.items():
            wall, cpu = time_cmd(argv, args.repeat, code)
            line = f"{name:<22} {TARGET[name]:>7.1f} {wall:>7.2f} {cpu:>7.2f}"
            if args.before_tree:
                bwall, bcpu = time_cmd(argv, args.repeat, code, args.before_tree)
                line += f" {bwall:>12.2f} {bcpu:>11.2f} {bcpu / cpu:>9.1f}x"
            print(line)
        assert not Path(f"{tmp}/none.db").exists(), "validate created a DB"
    print(f"(median of {args.repeat} fresh processes; load average now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
