"""What pairing the seeds bought a comparison: correlation and the seed multiplier it is worth.

Over the n seeds both a row and its baseline finished, with variant values x_s and baseline
values b_s (the same seed: the same data order and, under ``model.init: paired``, the same
initial value of every shared weight):

- ``pair_corr``: the Pearson correlation of (x_s, b_s).
- ``seed_multiplier``: (var(x) + var(b)) / var(x - b), sample variances over those seeds. The
  numerator is what the variance of the difference of two means would be per seed if the two
  sides had been drawn independently, the denominator what the paired difference has, so a
  paired comparison of n seeds is about as precise as an unpaired one of n x multiplier seeds
  per side (degrees of freedom aside). It is the *measured* ratio. The textbook 1 / (1 - rho)
  is the same number only when the two spreads are equal: in general
  var(x - b) = var(x) + var(b) - 2 rho sd(x) sd(b), so with unequal spreads the ratio is
  1 / (1 - rho * 2 sd(x) sd(b) / (var(x) + var(b))), below 1 / (1 - rho) for rho > 0.
  Below 1 when the pairing hurt (rho < 0).

Both are null with fewer than ``MIN_PAIRS`` paired seeds (two points always correlate +-1), and
where a variance is 0 (no spread to correlate; a difference with no spread has no finite ratio).
compare.py computes them as polars aggregations (``aggs``), sequential.py per row (``pairing``):
tests/results_db/test_pairing.py holds both to numpy on known numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from results_db.analysis.stats import fmean, sum_sq

MIN_PAIRS = 3
COLUMNS = ("pair_corr", "seed_multiplier")


@dataclass(frozen=True)
class Pairing:
    corr: float | None
    multiplier: float | None


def _var(v: Sequence[float]) -> float:
    return sum_sq(v, fmean(v)) / (len(v) - 1)


def pairing(x: Sequence[float], b: Sequence[float]) -> Pairing:
    """The written-out definition (module docstring); x[i] and b[i] are one seed's values."""
    if len(x) != len(b):
        raise ValueError(f"pairing: {len(x)} variant values vs {len(b)} baseline values")
    if len(x) < MIN_PAIRS:
        return Pairing(None, None)
    vx, vb = _var(x), _var(b)
    vd = _var([p - q for p, q in zip(x, b, strict=True)])
    corr = (vx + vb - vd) / (2 * math.sqrt(vx * vb)) if vx > 0 and vb > 0 else None
    return Pairing(corr, (vx + vb) / vd if vd > 0 and corr is not None else None)


def aggs(x: str, b: str) -> list[pl.Expr]:
    """``pair_corr`` and ``seed_multiplier`` as aggregations over one group's paired seeds
    (columns ``x`` and ``b``), the same definition as ``pairing``."""
    vx, vb = pl.col(x).var(), pl.col(b).var()
    vd = (pl.col(x) - pl.col(b)).var()
    enough = pl.len() >= MIN_PAIRS
    corr = pl.when(enough & (vx > 0) & (vb > 0)).then((vx + vb - vd) / (2 * (vx * vb).sqrt()))
    return [corr.alias("pair_corr"),
            pl.when(corr.is_not_null() & (vd > 0)).then((vx + vb) / vd).alias("seed_multiplier")]
