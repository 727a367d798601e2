"""Learning-rate stability as the paper measures it (Table 2) and as the runs show it.

A *ladder* is the runs of one config at several learning rates (``lr_group_key``: the config
minus seed, ``train.lr`` and ``train.min_lr``), labelled by its variant. Per (ladder, lr):

- ``n`` finished runs; ``mean``/``std``/CI of the final ``metric`` (default val/loss) over the
  seeds that neither diverged nor ended non-finite;
- ``diverged``: how many seeds diverged (run status ``diverged``, a ``stability/diverged``
  summary > 0, or a NaN/inf final value); ``loss_spikes``: ``stability/loss_spikes`` summed
  over seeds; ``max_activation``: the largest ``probe/max_activation`` over seeds;
- ``rel_to_best`` = mean / best - 1, where ``best`` is the ladder's lowest mean over the LRs
  where no seed diverged;
- ``degraded``: did not diverge but ``mean > best * (1 + tol)`` -- the run that trained badly
  without a spike (tol default 0.05 = 5 %, configurable);
- ``stable`` = no seed diverged and not degraded.

**max_stable_lr** = the largest LR reached from the ladder's best LR upwards through stable
LRs only (every tested LR from the best up to it is stable): a stable LR above an unstable
one is luck, not stability. Ties in max_stable_lr are told apart by ``rel_at_top_lr`` (the
degradation at the largest LR tried; a diverged top LR counts as infinitely degraded): the
summary lists the most stable ladder first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from results_db.analysis.stats import describe, mean_ci
from results_db.vocab import RESULT_STATES, higher_is_better

if TYPE_CHECKING:
    import polars as pl

DIVERGED_FLAG = "stability/diverged"
SPIKES = "stability/loss_spikes"
MAX_ACT = "probe/max_activation"
EXTRA_METRICS = (DIVERGED_FLAG, SPIKES, MAX_ACT)


@dataclass(frozen=True)
class Stability:
    curve: pl.DataFrame  # per (ladder, lr): see the module docstring
    summary: pl.DataFrame  # per ladder: variant, best_lr, best_value, max_stable_lr, n_lrs...
    rule: str  # the rule and tolerance in one sentence


def rule_text(metric: str, tol: float) -> str:
    return (f"An LR is stable when no seed diverged and its mean final {metric} is within "
            f"{tol:.0%} of the variant's best LR (mean <= best x {1 + tol:g}); max stable LR "
            f"is the largest LR reached from the best LR upwards through stable LRs only; "
            f"ties are ordered by the degradation at the largest LR tried.")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def _point(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """One (ladder, lr) from its runs (each: status and the four metric values)."""
    bad = [r["status"] == "diverged" or (r.get(DIVERGED_FLAG) or 0) > 0
           or not _finite(r.get(metric)) for r in runs]
    ok = [float(r[metric]) for r, b in zip(runs, bad, strict=True)
          if not b and r["status"] in RESULT_STATES]
    d = describe(ok)
    low, high = mean_ci(ok)
    spikes = [r[SPIKES] for r in runs if _finite(r.get(SPIKES))]
    acts = [r[MAX_ACT] for r in runs if _finite(r.get(MAX_ACT))]
    return {"n": len(runs), "mean": d.mean, "std": d.std, "ci_low": low, "ci_high": high,
            "diverged": sum(bad), "loss_spikes": sum(spikes) if spikes else None,
            "max_activation": max(acts) if acts else None}


def _ladder(points: list[dict[str, Any]], tol: float) -> dict[str, Any]:
    """Mark rel_to_best/degraded/stable on the ladder's points (sorted by lr); its summary."""
    ok = [p for p in points if p["diverged"] == 0 and p["mean"] is not None]
    best = min(ok, key=lambda p: p["mean"]) if ok else None
    for p in points:
        rel = p["mean"] / best["mean"] - 1 if best and p["mean"] is not None \
            and best["mean"] else None
        p["rel_to_best"] = rel
        p["degraded"] = p["diverged"] == 0 and rel is not None and rel > tol
        p["stable"] = p["diverged"] == 0 and rel is not None and rel <= tol
    msl = None
    if best is not None:
        for p in points[points.index(best):]:
            if not p["stable"]:
                break
            msl = p["lr"]
    top = points[-1]
    at_max = next((p["mean"] for p in points if p["lr"] == msl), None)
    return {"best_lr": best["lr"] if best else None, "best_value": best["mean"] if best else None,
            "max_stable_lr": msl, "n_lrs": len(points), "lrs": [p["lr"] for p in points],
            "min_diverged_lr": min((p["lr"] for p in points if p["diverged"]), default=None),
            "value_at_max": at_max, "top_lr": top["lr"],
            "rel_at_top_lr": math.inf if top["diverged"] else top["rel_to_best"]}


def analyse(runs: pl.DataFrame, metric: str = "val/loss", tol: float = 0.05) -> Stability:
    """``runs``: one row per finished run with variant, lr, lr_group_key, run_id, status and
    one column per metric in (metric, *EXTRA_METRICS) (null where not logged)."""
    import polars as pl

    if not 0 <= tol < 10:
        raise ValueError(f"stability: tol is a relative fraction (0.05 = 5 %), got {tol}")
    if higher_is_better(metric):
        raise ValueError(f"stability: {metric!r} is higher-is-better; the LR rule needs a "
                         f"loss-like metric (val/loss, val/ppl)")
    ladders: dict[str, dict[float, list[dict[str, Any]]]] = {}
    names: dict[str, list[str]] = {}
    for r in runs.filter(pl.col("lr").is_not_null()).sort("run_id").iter_rows(named=True):
        ladders.setdefault(r["lr_group_key"], {}).setdefault(float(r["lr"]), []).append(r)
        v = names.setdefault(r["lr_group_key"], [])
        if r["variant"] not in v:
            v.append(r["variant"])
    curve, summary = [], []
    for key, by_lr in ladders.items():
        variant = ",".join(names[key])
        points = [{"lr_group_key": key, "variant": variant, "lr": lr, **_point(rs, metric)}
                  for lr, rs in sorted(by_lr.items())]
        summary.append({"lr_group_key": key, "variant": variant, **_ladder(points, tol)})
        curve += points
    return Stability(_curve_frame(curve), _summary_frame(summary), rule_text(metric, tol))


_CURVE = {"lr_group_key": "String", "variant": "String", "lr": "Float64", "n": "Int64",
          "mean": "Float64", "std": "Float64", "ci_low": "Float64", "ci_high": "Float64",
          "rel_to_best": "Float64", "max_activation": "Float64", "loss_spikes": "Float64",
          "diverged": "Int64", "degraded": "Boolean", "stable": "Boolean"}
_SUMMARY = {"lr_group_key": "String", "variant": "String", "best_lr": "Float64",
            "best_value": "Float64", "max_stable_lr": "Float64", "n_lrs": "Int64",
            "lrs": "List(Float64)", "min_diverged_lr": "Float64", "value_at_max": "Float64",
            "top_lr": "Float64", "rel_at_top_lr": "Float64"}


def _dtype(name: str) -> Any:
    import polars as pl

    return pl.List(pl.Float64) if name == "List(Float64)" else getattr(pl, name)


def _curve_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    import polars as pl

    schema = {c: _dtype(t) for c, t in _CURVE.items()}
    return pl.DataFrame([{c: r[c] for c in schema} for r in rows], schema=schema)


def _summary_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    import polars as pl

    schema = {c: _dtype(t) for c, t in _SUMMARY.items()}
    df = pl.DataFrame(rows, schema=schema)
    return df.sort(pl.col("max_stable_lr"), pl.col("rel_at_top_lr"), "variant",
                   descending=[True, False, False], nulls_last=True)
