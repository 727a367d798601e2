"""Simulated sweeps with a known truth: does adding seeds until a row decides keep its error rate?

No training: each simulated sweep has R rows that share a baseline, and each row's per-seed
paired difference (variant - baseline, in units of its seed sigma) is drawn with a known mean
(0, 0.5, 1 or 2 seed-sigmas, cycled over the rows) and noise of known shape: normal; skewed (a
standardised gamma of skewness 1, and of skewness 2, a centred exponential); and ``real``,
resampled from measured per-seed differences (benchmarks/results/paired_init.csv: the relative
val/ppl difference of each seed pair of one cell, standardised), whose skewness is printed.
Three policies see the same draws:

- ``mixture t``: gatesweep's default ``decide:`` rule (results_db/analysis/confseq.py): every
  row starts with FIRST seeds; after each round, a row whose Bonferroni confidence sequence
  (alpha / R) decides (better / worse / within the margin) gets no more seeds, the others get
  one more, up to MAX seeds. It bounds the mean and assumes Gaussian differences;
- ``sign``: the same allocation read by the sign test's confidence sequence (``decide: {test:
  sign}``, results_db/analysis/signcs.py). It bounds the median and assumes only independent
  pairs; judged against the true median (mean + the noise's median);
- ``naive``: the mixture t's schedule judged by a fixed-n 95 % paired t interval re-checked
  after every seed (what "add seeds until the CI excludes 0" does).

A false verdict is "better"/"worse" against the true sign (or for a true 0), or "within noise"
for a row whose true effect is beyond the margin. The family-wise rate is the share of sweeps
with at least one. Printed: each policy's family-wise rate, the declared rate, the mean seeds a
row used per true effect, and the share of rows decided.

    python -m benchmarks.decide_sim                 # 4,000 sweeps of 15 rows, each noise
    python -m benchmarks.decide_sim --sims 2000 --rows 10 30 --real-cell 0.01,G1 elementwise
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import time
from pathlib import Path

import numpy as np
from scipy import stats

from results_db.analysis import signcs
from results_db.analysis.confseq import (
    BETTER,
    MIXTURE_G,
    UNDECIDED,
    WITHIN,
    WORSE,
    look,
    verdicts,
)

EFFECTS = (0.0, 0.5, 1.0, 2.0)  # true mean difference in seed sigmas, cycled over the rows
MARGIN = 0.75  # "within noise" margin in seed sigmas: 0 and 0.5 are inside it, 1 and 2 beyond


NOISE = {"normal": 0.0, "skew 0.5": 0.5, "skew 1": 1.0, "skew 1.5": 1.5,
         "skew 2 (stress)": 2.0}  # name -> skewness (SKEW_LIMIT is read off these rows)
REAL_CSV = Path(__file__).parent / "results" / "paired_init.csv"
POLICIES = ("mixture t", "sign", "naive")


def _draws(rng: np.random.Generator, sims: int, rows: int, seeds: int, skew: float
           ) -> tuple[np.ndarray, float]:
    """(sims, rows, seeds) zero-mean, unit-variance noise -- normal, or a standardised gamma of
    the given skewness (shape 4 / skew^2) -- and the noise's median."""
    if skew == 0:
        return rng.standard_normal((sims, rows, seeds)), 0.0
    shape = 4.0 / skew**2
    median = (float(stats.gamma.median(shape)) - shape) / math.sqrt(shape)
    return (rng.gamma(shape, 1.0, (sims, rows, seeds)) - shape) / np.sqrt(shape), median


def real_differences(cell: str, path: Path = REAL_CSV) -> np.ndarray:
    """The per-seed relative val/ppl differences (variant - baseline) / baseline of one cell
    ("LR,variant,init", e.g. "0.01,G1 elementwise,paired") of paired_init.csv."""
    lr, variant, init = cell.split(",")
    by: dict[tuple[str, int], float] = {}
    with path.open() as f:
        for r in csv.DictReader(f):
            if float(r["lr"]) == float(lr) and r["init"] == init and r["status"] == "succeeded":
                by[(r["variant"], int(r["seed"]))] = float(r["val_ppl"])
    seeds = sorted(s for v, s in by if v == variant and ("baseline", s) in by)
    return np.array([by[(variant, s)] / by[("baseline", s)] - 1.0 for s in seeds])


def _resampled(rng: np.random.Generator, real: np.ndarray, sims: int, rows: int, seeds: int
               ) -> tuple[np.ndarray, float]:
    """Noise drawn with replacement from the standardised real differences, and its median."""
    z = (real - real.mean()) / real.std(ddof=1)
    return rng.choice(z, (sims, rows, seeds)), float(np.median(z))


def sign_bounds(d: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(cap + 1, sims, rows) low and high of the sign test's interval after each prefix n of
    ``d`` (index n; 0 unused): the order statistics signcs.ranks names for (n, alpha)."""
    sims, rows, cap = d.shape
    low = np.full((cap + 1, sims, rows), -np.inf)
    high = np.full((cap + 1, sims, rows), np.inf)
    for n in range(1, cap + 1):
        i, j = signcs.ranks(n, alpha)
        head = np.sort(d[..., :n], axis=2)
        if i >= 1:
            low[n] = head[..., i - 1]
        if j <= n:
            high[n] = head[..., j - 1]
    return low, high


def _t_look(mean: np.ndarray, sd: np.ndarray, n: np.ndarray, level: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """The fixed-n paired t interval (what the leaderboard shows for a fixed-seed sweep)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        half = stats.t.ppf(0.5 + level / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n)
    half = np.where((n >= 2) & (sd > 0), half, np.inf)
    return mean - half, mean + half


def run(policy: str, d: np.ndarray, alpha: float, first: int, cap: int, g: float
        ) -> tuple[np.ndarray, np.ndarray]:
    """Play one policy over the draws ``d`` (sims, rows, cap): (verdict, seeds used) per row."""
    sims, rows, _ = d.shape
    signs = sign_bounds(d, alpha / rows) if policy == "sign" else None
    n = np.full((sims, rows), first)
    low = np.full((sims, rows), -np.inf)
    high = np.full((sims, rows), np.inf)
    verdict = np.full((sims, rows), UNDECIDED, dtype=object)
    open_ = np.ones((sims, rows), dtype=bool)
    csum = np.cumsum(d, axis=2)
    csq = np.cumsum(d * d, axis=2)
    while True:
        idx = (n - 1)[..., None]
        s, q = np.take_along_axis(csum, idx, 2)[..., 0], np.take_along_axis(csq, idx, 2)[..., 0]
        mean = s / n
        sd = np.sqrt(np.maximum(q - n * mean * mean, 0.0) / np.maximum(n - 1, 1))
        if policy != "naive":  # Bonferroni over the rows, intersected over looks
            if signs is not None:
                at = n[None, ...]
                lo = np.take_along_axis(signs[0], at, 0)[0]
                hi = np.take_along_axis(signs[1], at, 0)[0]
            else:
                lo, hi = look(mean, sd, n, alpha / rows, g)
            low = np.where(open_, np.maximum(low, lo), low)
            high = np.where(open_, np.minimum(high, hi), high)
        else:  # the fixed-n interval of this look alone
            lo, hi = _t_look(mean, sd, n, 0.95)
            low, high = np.where(open_, lo, low), np.where(open_, hi, high)
        now = verdicts(low, high, MARGIN, higher_is_better=False, at_cap=n >= cap)
        verdict = np.where(open_, now, verdict)
        open_ = open_ & (verdict == UNDECIDED)
        if not open_.any():
            return verdict, n
        n = np.where(open_, n + 1, n)


def false_verdicts(verdict: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per (sim, row): a verdict the truth contradicts (lower is better: better = negative)."""
    wrong_sign = ((verdict == BETTER) & (truth >= 0)) | ((verdict == WORSE) & (truth <= 0))
    return wrong_sign | ((verdict == WITHIN) & (np.abs(truth) > MARGIN))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=4_000)
    ap.add_argument("--rows", type=int, nargs="+", default=[15])
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--first", type=int, default=3)
    ap.add_argument("--cap", type=int, default=30)
    ap.add_argument("--g", type=float, default=MIXTURE_G)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real-cell", action="append", default=None,
                    help="LR,variant,init of paired_init.csv to resample (repeatable; default "
                         "the 1e-2 and 3e-3 G1 elementwise cells, paired)")
    args = ap.parse_args(argv)
    cells = args.real_cell or ["0.01,G1 elementwise,paired", "0.003,G1 elementwise,paired"]
    print(f"{time.strftime('%Y-%m-%d %H:%M')} {platform.node()} {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; {args.sims} sweeps per case, seeds {args.first}.."
          f"{args.cap}, alpha {args.alpha}, margin {MARGIN} sigma, g {args.g}")
    print("| rows | noise | policy | family-wise false-verdict rate | "
          + " | ".join(f"mean seeds, effect {e:g}" for e in EFFECTS) + " | decided |")
    print("|---:|---|---|---:|" + "---:|" * len(EFFECTS) + "---:|")
    rng = np.random.default_rng(args.seed)
    for rows in args.rows:
        truth = np.resize(np.array(EFFECTS), rows)
        cases = [(name, *_draws(rng, args.sims, rows, args.cap, skew))
                 for name, skew in NOISE.items()]
        for cell in cells if REAL_CSV.exists() else []:
            real = real_differences(cell)
            name = f"real {cell} (n {len(real)}, skew {stats.skew(real, bias=False):+.2f})"
            cases.append((name, *_resampled(rng, real, args.sims, rows, args.cap)))
        for noise, draws, median in cases:
            d = truth[None, :, None] + draws
            for policy in POLICIES:
                verdict, used = run(policy, d, args.alpha, args.first, args.cap, args.g)
                # each rule against what it bounds: the sign test the median, the others the mean
                target = truth + median if policy == "sign" else truth
                fwer = false_verdicts(verdict, target[None, :]).any(axis=1).mean()
                seeds = [used[:, truth == e].mean() for e in EFFECTS]
                decided = np.isin(verdict, [BETTER, WORSE, WITHIN]).mean()
                print(f"| {rows} | {noise} | {policy} | "
                      f"{fwer:.4f} | " + " | ".join(f"{s:.1f}" for s in seeds)
                      + f" | {decided:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
