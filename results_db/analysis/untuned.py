"""Is the baseline tuned at a row's learning rate? The condition every per-LR delta carries.

A leaderboard row compares a variant with the baseline *at the same LR* (compare.match_axes).
At an LR where the baseline itself trains badly, a variant "beats the baseline" by beating a
degraded model: the gates-toy sweep's three "better" rows all sat at LR >= 3e-2, where the
baseline's val PPL was 10.22 against 7.19 at its best LR 1e-2, and one of them (8.09) was 12 %
worse than the tuned baseline. So each baseline ladder (bestlr.ladders: the seed groups of one
config that differ only in the LR) is compared with itself at its best LR:

- **best LR**: the LR with the best mean over all its seeds where no seed diverged
  (bestlr.Ladder.pick: the stability rule's choice);
- **untuned at an LR**: some seed diverged there, or the paired (else Welch) 95 % CI of
  mean(baseline at the LR) - mean(baseline at its best LR) (stats.delta_ci) excludes 0 on the
  worse side -- "worse beyond noise", the leaderboard's rule (verdict.interval_verdict). A
  baseline a little worse within noise is not called untuned;
- ``worse_pct``: how much worse, in % of |mean at the best LR|, positive = worse (by the
  metric's direction).

Every row at that point of the sweep's axes -- the baseline's own and each variant's compared
with it -- gets the words ``condition``: "vs an untuned baseline (42.1 % worse than at its best
LR 1e-2)" (the baseline's own row: "untuned baseline (...)"). Such a row is a detail: it is
never counted toward a headline "better" (findings.py answers at the baseline's tuned LR).
Pure Python over bestlr's ladders; api.py puts the column on db.leaderboard.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from results_db.analysis.bestlr import Ladder, ladders
from results_db.analysis.columns import CONDITION
from results_db.analysis.labels import lr_text
from results_db.analysis.stats import delta_ci, fmean
from results_db.analysis.verdict import WORSE, interval_verdict


@dataclass(frozen=True)
class BaselineAt:
    """The baseline ladder at one LR against itself at its best LR."""

    lr: float
    best_lr: float | None
    worse_pct: float | None  # positive: worse than at the best LR (None: no value there)
    diverged: int  # seeds that diverged at this LR
    untuned: bool

    def words(self, own: bool) -> str | None:
        """The condition said beside a row compared with this baseline (``own``: the
        baseline's own row); None where the baseline is tuned enough."""
        if not self.untuned or self.best_lr is None:
            return None
        who = "untuned baseline" if own else "vs an untuned baseline"
        best = lr_text(self.best_lr)
        if self.worse_pct is None or self.diverged:
            return f"{who} ({self.diverged} seed(s) diverged at {lr_text(self.lr)})"
        return f"{who} ({self.worse_pct:.1f} % worse than at its best LR {best})"


def judge(ladder: Ladder, higher: bool) -> dict[float, BaselineAt]:
    """Each LR of a baseline ladder against its best LR (module docstring)."""
    best = ladder.pick(None, higher)
    out: dict[float, BaselineAt] = {}
    for lr in ladder.lrs:
        diverged = sum(1 for d, _ in ladder.diverged if d == lr)
        if best is None or lr == best:
            out[lr] = BaselineAt(lr, best, 0.0 if lr == best else None, diverged,
                                 diverged > 0 and best is not None)
            continue
        x, b = ladder.values.get(lr, {}), ladder.values[best]
        ci = delta_ci(list(x.values()), list(b.values()), list(x), list(b))
        ref = fmean(b.values())
        worse = None
        if ci.delta is not None and ref != 0:
            worse = 100.0 * ci.delta / abs(ref) * (-1.0 if higher else 1.0)
        beyond = (ci.low is not None and ci.high is not None
                  and interval_verdict(ci.low, ci.high, None, higher_is_better=higher) == WORSE)
        out[lr] = BaselineAt(lr, best, worse, diverged, diverged > 0 or beyond)
    return out


def baseline_conditions(board: pl.DataFrame, values: pl.DataFrame, higher: bool,
                        baseline: str | None) -> pl.DataFrame:
    """(group_key, condition, base_worse_pct, base_untuned) for every row of ``board`` (a
    leaderboard or compare() frame) whose baseline is known; ``values``: group_key, seed,
    value and status of the finished runs (as best_vs_best reads them)."""
    schema = {"group_key": pl.String, CONDITION: pl.String, "base_worse_pct": pl.Float64,
              "base_untuned": pl.Boolean}
    if baseline is None or board.is_empty() or not board["is_baseline"].any():
        return pl.DataFrame(schema=schema)
    found, base_of, _ = ladders(board, values, baseline)
    judged = {key: judge(found[key], higher)
              for key in {*(k for k in base_of.values() if k is not None),
                          *board.filter(pl.col("is_baseline"))["lr_group_key"].cast(pl.String)}
              if key in found}
    rows = []
    for g, key, lr, own in board.select("group_key", pl.col("lr_group_key").cast(pl.String),
                                        "lr", "is_baseline").iter_rows():
        b = key if own else base_of.get(key)
        at = judged.get(b or "", {}).get(float(lr)) if lr is not None else None
        if at is not None:
            rows.append((str(g), at.words(bool(own)), at.worse_pct, at.untuned))
    return pl.DataFrame(rows, schema=schema, orient="row")
