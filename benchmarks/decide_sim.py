"""Simulated sweeps with a known truth: does adding seeds until a row decides keep its error rate?

No training: each simulated sweep has R rows that share a baseline, and each row's per-seed
paired difference (variant - baseline, in units of its seed sigma) is drawn with a known mean
(0, 0.5, 1 or 2 seed-sigmas, cycled over the rows): normal, or skewed (a standardised gamma of
skewness 1, and of skewness 2, a centred exponential, as a stress case beyond the Gaussian model
the guarantee assumes).
Two policies see the same draws:

- ``adaptive``: gatesweep's ``decide:`` rule (results_db/analysis/confseq.py): every row starts
  with FIRST seeds; after each round, a row whose Bonferroni confidence sequence (alpha / R)
  decides (better / worse / within the margin) gets no more seeds, the others get one more,
  up to MAX seeds;
- ``naive``: the same schedule judged by a fixed-n 95 % paired t interval re-checked after every
  seed (what "add seeds until the CI excludes 0" does).

A false verdict is "better"/"worse" against the true sign (or for a true 0), or "within noise"
for a row whose true effect is beyond the margin. The family-wise rate is the share of sweeps
with at least one. Printed: both policies' family-wise rates side by side, the declared rate,
and the mean seeds a row used per true effect.

    python -m benchmarks.decide_sim                 # 10,000 sweeps of 15 rows, each noise
    python -m benchmarks.decide_sim --sims 2000 --rows 10 30
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
from scipy import stats

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


NOISE = {"normal": 0.0, "skew 1": 1.0, "skew 2 (stress)": 2.0}  # name -> skewness


def _draws(rng: np.random.Generator, sims: int, rows: int, seeds: int, skew: float
           ) -> np.ndarray:
    """(sims, rows, seeds) zero-mean, unit-variance noise: normal, or a standardised gamma of
    the given skewness (shape 4 / skew^2)."""
    if skew == 0:
        return rng.standard_normal((sims, rows, seeds))
    shape = 4.0 / skew**2
    return (rng.gamma(shape, 1.0, (sims, rows, seeds)) - shape) / np.sqrt(shape)


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
        if policy == "adaptive":  # Bonferroni over the rows, intersected over looks
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
    ap.add_argument("--sims", type=int, default=10_000)
    ap.add_argument("--rows", type=int, nargs="+", default=[15])
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--first", type=int, default=3)
    ap.add_argument("--cap", type=int, default=30)
    ap.add_argument("--g", type=float, default=MIXTURE_G)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"{time.strftime('%Y-%m-%d %H:%M')} {platform.node()} {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; {args.sims} sweeps per case, seeds {args.first}.."
          f"{args.cap}, alpha {args.alpha}, margin {MARGIN} sigma, g {args.g}")
    print("| rows | noise | policy | family-wise false-verdict rate | "
          + " | ".join(f"mean seeds, effect {e:g}" for e in EFFECTS) + " | decided |")
    print("|---:|---|---|---:|" + "---:|" * len(EFFECTS) + "---:|")
    rng = np.random.default_rng(args.seed)
    for rows in args.rows:
        truth = np.resize(np.array(EFFECTS), rows)
        for noise, skew in NOISE.items():
            d = truth[None, :, None] + _draws(rng, args.sims, rows, args.cap, skew)
            for policy in ("adaptive", "naive"):
                verdict, used = run(policy, d, args.alpha, args.first, args.cap, args.g)
                fwer = false_verdicts(verdict, truth[None, :]).any(axis=1).mean()
                seeds = [used[:, truth == e].mean() for e in EFFECTS]
                decided = np.isin(verdict, [BETTER, WORSE, WITHIN]).mean()
                print(f"| {rows} | {noise} | {policy} | "
                      f"{fwer:.4f} | " + " | ".join(f"{s:.1f}" for s in seeds)
                      + f" | {decided:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
