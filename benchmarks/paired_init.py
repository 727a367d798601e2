"""What paired initialisation buys: baseline vs G1 gates, paired vs legacy init, side by side.

    DS_ACCELERATOR=cpu nice -n 19 .venv/bin/python benchmarks/paired_init.py \\
        [--lrs 3e-3,1e-2] [--seeds 12] [--workers 2] [--out benchmarks/results/paired_init.csv]
    .venv/bin/python benchmarks/paired_init.py --summary-only   # the table from the CSV

The trainer is called directly (no Ray, no DB): model `tiny`, the data and schedule of
sweeps/decide.yaml's ``base`` (read from the file: stdlib bytes, 400 steps of 8 x 192, warmup
40), at each learning rate of sweeps/gates.yaml's ladder (``--lrs`` picks a subset), for the
baseline, G1 elementwise and G1 headwise, seeds 0..N-1 (never chosen by their results), under
``model.init: paired`` and ``legacy``. Evaluation only at the end and no probes: neither changes
training, so the final val/ppl is the one the sweep would record.

Each finished run is appended to the CSV at once (one row: lr, init, variant, seed, val/ppl,
val/loss, status, wall seconds), so an interrupted study resumes where it stopped (rows already
there are skipped). Per cell (LR x variant x scheme) it prints: the seeds with a finite pair,
the mean and sd of the per-seed relative difference of val/ppl (variant vs baseline, %), the
Pearson correlation of baseline and variant over the seeds, and how many seeds the decide mode
would need for the observed effect if mean and spread stay (results_db.analysis.sequential's
own rule, with decide.yaml's margin and error rate over its two rows), with the fixed-n paired
t-test's seeds_needed beside it.

Workers: ``--workers`` processes (multiprocessing), one torch thread each.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import yaml  # noqa: E402

DECIDE = ROOT / "sweeps" / "decide.yaml"
LADDER = ROOT / "sweeps" / "gates.yaml"
OUT = ROOT / "benchmarks" / "results" / "paired_init.csv"
SCHEMES = ("paired", "legacy")
G1: dict[str, Any] = {"position": "G1"}
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "baseline": [], "G1 elementwise": [G1], "G1 headwise": [{**G1, "granularity": "headwise"}]}
FIELDS = ("lr", "init", "variant", "seed", "val_ppl", "val_loss", "status", "wall_s")


def _ladder() -> list[float]:
    return [float(x) for x in yaml.safe_load(LADDER.read_text())["axes"]["train.lr"]]


def _base() -> dict[str, Any]:
    return yaml.safe_load(DECIDE.read_text())["base"]


def run_one(job: tuple[float, str, str, int]) -> dict[str, Any]:
    """Train one run; its CSV row."""
    import torch

    from contract import metrics
    from contract.config import RunSpec
    from contract.reporter import MemoryReporter
    from trainer.train import train

    torch.set_num_threads(1)
    lr, init, variant, seed = job
    base = _base()
    spec = RunSpec(name=f"{variant}-{init}-{lr:g}-{seed}", sweep="paired-init", seed=seed,
                   model={**base["model"], "gates": VARIANTS[variant], "init": init},
                   data=base["data"],
                   train={**base["train"], "lr": lr, "eval_every": 0},
                   eval={"probes": []}, resources={"cpus": 1})
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as ckpt:
        result = train(spec, MemoryReporter(), ckpt)
    s = result.summary
    return {"lr": lr, "init": init, "variant": variant, "seed": seed,
            "val_ppl": s.get(metrics.VAL_PPL, math.nan),
            "val_loss": s.get(metrics.VAL_LOSS, math.nan),
            "status": str(result.status), "wall_s": round(time.perf_counter() - t0, 2)}


def _done(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with path.open() as f:
        return [{**r, "lr": float(r["lr"]), "seed": int(r["seed"]),
                 "val_ppl": float(r["val_ppl"]), "val_loss": float(r["val_loss"]),
                 "wall_s": float(r["wall_s"])} for r in csv.DictReader(f)]


def _jobs(lrs: list[float], seeds: int, done: list[dict[str, Any]]
          ) -> list[tuple[float, str, str, int]]:
    """Every missing run, LR by LR and seed by seed: an interrupted study has whole seeds."""
    have = {(r["lr"], r["init"], r["variant"], r["seed"]) for r in done}
    return [(lr, init, v, s) for lr in lrs for s in range(seeds) for init in SCHEMES
            for v in VARIANTS if (lr, init, v, s) not in have]


def _corr(a: list[float], b: list[float]) -> float:
    if len(a) < 3 or statistics.pstdev(a) == 0 or statistics.pstdev(b) == 0:
        return math.nan
    return statistics.correlation(a, b)


def _decide_seeds(mean: float, sd: float) -> tuple[int | None, int]:
    """(seeds the decide mode needs, the fixed-n paired t-test's) for relative mean / sd."""
    from contract import metrics
    from results_db.analysis import sequential, stats
    from results_db.analysis.decide_rule import DecideRule

    d = yaml.safe_load(DECIDE.read_text())["decide"]
    rows = len(VARIANTS) - 1  # Bonferroni over decide.yaml's rows, as sequential.read_rows
    rule = DecideRule(metric=metrics.VAL_PPL, margin=d["margin"], relative=True,
                      error_rate=d["error_rate"], max_seeds=stats.MAX_SEEDS,
                      higher_is_better=False)
    decide = sequential._more(mean, sd, 0, rule, d["error_rate"] / rows)
    fixed = stats.seeds_needed(sd, max(abs(mean), 1e-9), paired=True) if sd > 0 else 2
    return decide, fixed


def summarise(rows: list[dict[str, Any]]) -> str:
    by = {(r["lr"], r["init"], r["variant"], r["seed"]): r["val_ppl"] for r in rows}
    lines = ["| LR | variant | init | seeds | mean delta % | per-seed delta % sd | "
             "corr(baseline, variant) | decide seeds | t-test seeds |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for lr in sorted({r["lr"] for r in rows}):
        for variant in [v for v in VARIANTS if v != "baseline"]:
            for init in SCHEMES:
                seeds = sorted({s for (x, i, v, s) in by if (x, i, v) == (lr, init, variant)})
                pairs = [(by[(lr, init, "baseline", s)], by[(lr, init, variant, s)])
                         for s in seeds if (lr, init, "baseline", s) in by]
                pairs = [(b, x) for b, x in pairs if math.isfinite(b) and math.isfinite(x)]
                if len(pairs) < 2:
                    continue
                base, var = [b for b, _ in pairs], [x for _, x in pairs]
                d = [(x - b) / abs(b) for b, x in pairs]
                mean, sd = statistics.mean(d), statistics.stdev(d)
                decide, fixed = _decide_seeds(mean, sd)
                shown = "> 1000 (cap)" if decide is None else str(decide)
                lines.append(f"| {lr:g} | {variant} | {init} | {len(pairs)} | "
                             f"{100 * mean:+.2f} | {100 * sd:.2f} | {_corr(base, var):+.2f} | "
                             f"{shown} | {fixed} |")
    return "\n".join(lines)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", type=lambda s: [float(x) for x in s.split(",")], default=None,
                    help="comma-separated subset of gates.yaml's LR ladder (default: all)")
    ap.add_argument("--seeds", type=int, default=12, help="seeds 0..N-1 per cell")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args()
    done = _done(args.out)
    if not args.summary_only:
        jobs = _jobs(args.lrs or _ladder(), args.seeds, done)
        print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
              f"{os.cpu_count()} CPUs, load {_load()}: {len(jobs)} runs, {args.workers} "
              f"worker(s)", flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        new = not args.out.exists()
        with args.out.open("a", newline="") as f, \
                mp.get_context("spawn").Pool(args.workers) as pool:
            w = csv.DictWriter(f, FIELDS)
            if new:
                w.writeheader()
            for i, row in enumerate(pool.imap_unordered(run_one, jobs), 1):
                w.writerow(row)
                f.flush()
                done.append(row)
                print(f"{i}/{len(jobs)} {row['variant']} {row['init']} lr={row['lr']:g} "
                      f"seed={row['seed']}: val/ppl {row['val_ppl']:.4f} ({row['wall_s']} s)",
                      flush=True)
        print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load {_load()}")
    print(summarise(done))


if __name__ == "__main__":
    main()
