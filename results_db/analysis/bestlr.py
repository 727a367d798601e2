"""Each variant at its best learning rate against the baseline at *its* best LR ("best vs
best"), with the LR chosen on other seeds than the ones that judge it.

Picking each side's LR by its mean over all seeds and then comparing those same seeds is a
winner's curse: the LR won partly because its seeds were lucky, and the comparison inherits the
luck. Two honest ways, both here:

- **leave-one-seed-out** (default): for each seed s, each side's LR is the one with the best
  mean over its *other* seeds (an LR where one of those seeds diverged is not eligible: a best
  LR is a stable one, as in stability.py); seed s is judged at that LR. The judged values (one
  per seed, each at an LR its own noise did not choose) are compared as the leaderboard
  compares a row: ``stats.delta_ci`` (paired by seed when both sides have the same seeds,
  else Welch), the verdict by verdict.py at 95 %. The judged values share selection seeds, so
  they are not quite independent: the CI is the usual approximation of cross-validation.
  ``picks`` says which LR each seed was judged at ("s0 4e-3, s1 4e-3"); a seed without a finite
  value at its pick (it diverged there) is left out and counted in ``note``.
- **a declared LR** (``lr=``): both sides at that LR, chosen before looking; the leaderboard's
  own row at that LR.

What the design cannot support is said in words, never drawn as tuned: a side that ran at one
LR has no best LR (verdict ``NO_BEST_LR``: the case of a variant run only at 3e-2 shown
as "its best LR 3e-2" against the baseline's tuned 1e-2); a side with one seed has no other
seed to choose on (``ONE_SEED``); a side not run at the declared LR has nothing there
(``NOT_RUN``). Ladders are seed groups that differ only in the LR (``lr_group_key``); each is
compared with the baseline's ladder at the same value of every other axis (compare.match_axes).
Pure polars/Python over db.leaderboard's frame and the runs' values: api.best_vs_best reads
them, dashboard/compare.py only formats the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from contract.analysis_defaults import MIN_EFFECT
from contract.states import RunStatus
from results_db.analysis.compare import _key, match_axes, pct_of_base
from results_db.analysis.labels import LOSO, NO_BEST_LR, NOT_RUN, ONE_SEED, lr_text
from results_db.analysis.stats import delta_ci, fmean, seeds_needed_many
from results_db.analysis.verdict import verdict_expr

# polars dtype names (getattr(pl, ...)): polars is imported where a frame is built, so that
# importing this module (api.py, summary.py do at their top) stays as light as the CLI needs
SCHEMA: dict[str, str] = {
    "variant": "String", "label": "String", "n_lrs": "Int64", "best_lr": "Float64",
    "baseline_best_lr": "Float64", "selection": "String", "picks": "String",
    "baseline_picks": "String", "n": "Int64", "base_n": "Int64", "delta": "Float64",
    "delta_pct": "Float64", "ci_low_pct": "Float64", "ci_high_pct": "Float64",
    "ci_method": "String", "verdict": "String", "note": "String"}
DIVERGED = RunStatus.DIVERGED.value


def _schema() -> dict[str, Any]:
    return {c: getattr(pl, t) for c, t in SCHEMA.items()}


@dataclass
class Ladder:
    """One seed group per LR of one config: lr -> {seed: finite value}, and the (lr, seed)
    runs that diverged (or ended non-finite)."""

    label: str
    values: dict[float, dict[int, float]] = field(default_factory=dict)
    diverged: set[tuple[float, int]] = field(default_factory=set)

    @property
    def lrs(self) -> list[float]:
        return sorted(set(self.values) | {lr for lr, _ in self.diverged})

    @property
    def seeds(self) -> list[int]:
        return sorted({s for v in self.values.values() for s in v}
                      | {s for _, s in self.diverged})

    def pick(self, without: int | None, higher: bool) -> float | None:
        """The LR with the best mean over the seeds but ``without`` (ties: the smaller LR);
        an LR where one of those seeds diverged, or none has a value, is not eligible."""
        best: tuple[float, float] | None = None
        for lr in self.lrs:
            if any(s != without for d, s in self.diverged if d == lr):
                continue
            vals = [v for s, v in self.values.get(lr, {}).items() if s != without]
            if not vals:
                continue
            score = fmean(vals) * (-1.0 if higher else 1.0)
            if best is None or score < best[0]:
                best = (score, lr)
        return None if best is None else best[1]

    def judged(self, higher: bool, lr: float | None
               ) -> tuple[dict[int, float], dict[int, float], int]:
        """({seed: value judged}, {seed: the LR it was judged at}, seeds left out): at the
        declared ``lr``, else each seed at the LR its other seeds pick."""
        values: dict[int, float] = {}
        at: dict[int, float] = {}
        missing = 0
        for seed in self.seeds:
            chosen = lr if lr is not None else self.pick(seed, higher)
            if chosen is None:
                continue
            at[seed] = chosen
            if (v := self.values.get(chosen, {}).get(seed)) is None:
                missing += 1
            else:
                values[seed] = v
        return values, at, missing


def ladders(board: pl.DataFrame, values: pl.DataFrame, baseline: str | None
            ) -> tuple[dict[str, Ladder], dict[str, str | None], list[str]]:
    """({ladder key: Ladder}, {variant ladder key: its baseline ladder key}, variant ladder
    keys in board order). ``values``: group_key, seed, value and optionally status (a
    diverged status or a non-finite value is a divergence)."""
    axes = [a for a in match_axes(board, baseline) if a != "lr"]
    keyed = board.with_columns(_ax=_key(board, axes))
    info = {r["group_key"]: r for r in keyed.iter_rows(named=True)}
    out: dict[str, Ladder] = {}
    for r in keyed.iter_rows(named=True):
        label = str(r["variant"]) + (f" ({', '.join(f'{a}={r[a]}' for a in axes)})"
                                     if axes else "")
        out.setdefault(str(r["lr_group_key"]), Ladder(label))
    status = values["status"] if "status" in values.columns else None
    for i, (g, seed, v) in enumerate(values.select("group_key", "seed", "value").iter_rows()):
        group = info.get(g)
        if group is None or group["lr"] is None:
            continue
        ladder, lr = out[str(group["lr_group_key"])], float(group["lr"])
        bad = v is None or not math.isfinite(v) or (status is not None
                                                    and status[i] == DIVERGED)
        if bad:
            ladder.diverged.add((lr, int(seed)))
        else:
            ladder.values.setdefault(lr, {})[int(seed)] = float(v)
    base_of: dict[str, str] = {}
    bases = keyed.filter(pl.col("is_baseline"))
    for ax, key in bases.select("_ax", "lr_group_key").iter_rows():
        base_of.setdefault(ax, str(key))
    order: list[str] = []
    matched: dict[str, str | None] = {}
    for r in keyed.filter(~pl.col("is_baseline")).iter_rows(named=True):
        key = str(r["lr_group_key"])
        if key not in matched:
            order.append(key)
            matched[key] = base_of.get(r["_ax"])
    return out, matched, order


def _picks(at: dict[int, float]) -> str:
    return ", ".join(f"s{s} {lr_text(lr)}" for s, lr in sorted(at.items()))


def _compare(x: Ladder, b: Ladder, higher: bool, lr: float | None) -> dict[str, Any]:
    """One row's numbers, or its words when the design cannot support the comparison."""
    row: dict[str, Any] = {"label": x.label, "n_lrs": len(x.lrs),
                           "selection": LOSO if lr is None else f"declared LR {lr_text(lr)}",
                           "best_lr": lr if lr is not None else x.pick(None, higher),
                           "baseline_best_lr": lr if lr is not None else b.pick(None, higher)}
    sides = ((x.label, x), ("the baseline" + (f" {b.label}" if b.label != "baseline" else ""),
                            b))
    untuned = {**row, "best_lr": None, "baseline_best_lr": None}  # never shown as tuned
    if lr is None:
        for side, ladder in sides:
            if len(ladder.lrs) < 2:
                only = lr_text(ladder.lrs[0]) if ladder.lrs else "no LR"
                return {**untuned, "verdict": NO_BEST_LR,
                        "note": f"{side} ran at one LR ({only}) only: no best LR to compare "
                                "(the leaderboard has the change at that LR)"}
        for side, ladder in sides:
            if len(ladder.seeds) < 2:
                return {**untuned, "verdict": ONE_SEED,
                        "note": f"{side} has one seed: no other seed to choose its LR on"}
    else:
        for side, ladder in sides:
            if lr not in ladder.lrs:
                return {**untuned, "verdict": NOT_RUN,
                        "note": f"{side} did not run at {lr_text(lr)}"}
    xv, xat, xmiss = x.judged(higher, lr)
    bv, bat, bmiss = b.judged(higher, lr)
    ci = delta_ci(list(xv.values()), list(bv.values()), list(xv), list(bv))
    left = [f"{n} seed{'s' if n != 1 else ''} of {who} without a finite value at "
            f"{'its pick' if lr is None else lr_text(lr)} (diverged) left out"
            for n, who in ((xmiss, x.label), (bmiss, "the baseline")) if n]
    return {**row, "picks": _picks(xat), "baseline_picks": _picks(bat), "n": len(xv),
            "base_n": len(bv), "delta": ci.delta, "ci_low": ci.low, "ci_high": ci.high,
            "ci_method": ci.method, "_spread": ci.spread,
            "base_mean": fmean(bv.values()) if bv else None,
            "note": "; ".join(left) or None}


def best_vs_best(board: pl.DataFrame, values: pl.DataFrame, higher: bool,
                 baseline: str | None, *, lr: float | None = None,
                 min_effect: float = MIN_EFFECT) -> pl.DataFrame:
    """Each variant ladder at its best LR vs the baseline's ladder at its best LR (module
    docstring): SCHEMA's columns, one row per variant ladder in board order; empty without a
    baseline. ``board``: db.leaderboard (variant, lr, group_key, lr_group_key, is_baseline,
    the dimension columns); ``values``: group_key, seed, value (and status) of the finished
    runs; ``lr``: a declared LR instead of the held-out choice."""
    if baseline is None or board.is_empty() or not board["is_baseline"].any():
        return pl.DataFrame(schema=_schema())
    found, base_of, order = ladders(board, values, baseline)
    variant = dict(zip(board["lr_group_key"].cast(pl.String), board["variant"], strict=True))
    rows = []
    for key in order:
        b = base_of.get(key)
        if b is None:
            rows.append({"label": found[key].label, "n_lrs": len(found[key].lrs),
                         "verdict": "no data", "variant": variant[key],
                         "note": "no baseline ladder at this point of the sweep's axes"})
            continue
        rows.append({"variant": variant[key], **_compare(found[key], found[b], higher, lr)})
    return _judge(pl.DataFrame(rows, infer_schema_length=None), higher, min_effect)


def _judge(t: pl.DataFrame, higher: bool, min_effect: float) -> pl.DataFrame:
    """Percentages and the verdict of the compared rows by the leaderboard's rule
    (verdict.verdict_expr, stats.seeds_needed_many); the others keep their words."""
    for c, dtype in {**_schema(), "ci_low": pl.Float64, "ci_high": pl.Float64,
                     "base_mean": pl.Float64, "_spread": pl.Float64}.items():
        # a column every row left None is Null-typed: cast it, as a missing one is made
        t = t.with_columns((pl.col(c).cast(dtype) if c in t.columns else pl.lit(None, dtype))
                           .alias(c))
    bmean = pl.col("base_mean")
    t = t.with_columns(is_baseline=pl.lit(False), _rel=pl.when(bmean != 0).then(
        pl.col("_spread") / bmean.abs()))
    t = t.with_columns(seeds_needed=seeds_needed_many(t["_rel"], min_effect,
                                                      t["ci_method"] == "paired"),
                       **{f"{c}_pct": pct_of_base(pl.col(c), bmean)
                          for c in ("delta", "ci_low", "ci_high")})
    judged = verdict_expr(higher_is_better=higher, min_effect=min_effect)
    t = t.with_columns(verdict=pl.when(pl.col("verdict").is_null()).then(judged)
                       .otherwise(pl.col("verdict")))
    return t.select(pl.col(c).cast(d) for c, d in _schema().items())


def declared_check(lr: float | None, lrs: Sequence[float]) -> None:
    """A declared LR must be one the sweep ran (a typo would compare nothing)."""
    if lr is not None and lr not in lrs:
        shown = ", ".join(lr_text(v) for v in sorted(lrs)) or "none"
        raise ValueError(f"lr: the sweep ran no row at {lr_text(lr)}; its learning rates: "
                         f"{shown}")
