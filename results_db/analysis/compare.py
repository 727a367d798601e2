"""Seed groups of a sweep compared with the baseline: n, mean, std, delta, CI, verdict.

A *group* is the seed replicates of one config (``group_key``: the config minus the seed),
labelled by its variant and learning rate; its statistics are over the runs in ``states``
(default: succeeded) with a finite value; its diverged runs are counted (``n_diverged``),
never averaged.

Each group is compared with ONE baseline group (the baseline variant: baseline.py): the one
at the same value of every dimension the baseline was swept over (its axes: ``lr``, ``steps``,
...); failing that, the one at the same ``lr``; failing that, none ("no data": comparing
with another learning rate's baseline would mix the LR effect into the delta).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from results_db.analysis.stats import DeltaCI, delta_ci, describe
from results_db.analysis.verdict import needed, verdict
from results_db.states import parse_status
from results_db.vocab import DIMENSIONS, RESULT_STATES, higher_is_better

if TYPE_CHECKING:
    import polars as pl

INFO = ("variant", "lr", "lr_group_key", *[d for d in DIMENSIONS if d != "lr"], "n_gates",
        "params_total", "params_gates")
STAT_COLUMNS = ("n", "mean", "std", "is_baseline", "delta", "delta_pct", "ci_low", "ci_high",
                "ci_low_pct", "ci_high_pct", "ci_method", "verdict", "seeds_needed")


def _groups(values: pl.DataFrame, states: Sequence[str]) -> list[dict[str, Any]]:
    """One dict per group_key in declared order (first run id): INFO, seeds/values (runs in
    ``states`` with a finite value), n_diverged."""
    import polars as pl

    ok = pl.col("status").is_in(list(states)) & pl.col("value").is_finite().fill_null(False)
    info = [pl.col(c).first() for c in INFO if c in values.columns]
    agg = (values.sort("run_id").group_by("group_key", maintain_order=True)
           .agg(*info, seeds=pl.col("seed").filter(ok), values=pl.col("value").filter(ok),
                n_diverged=(pl.col("status") == "diverged").sum().cast(pl.Int64)))
    return agg.to_dicts()


def _baseline_of(g: dict[str, Any], bases: list[dict[str, Any]],
                 axes: list[str]) -> dict[str, Any] | None:
    for keys in (axes, ["lr"] if "lr" in axes else None):
        if keys is None:
            break
        hit = [b for b in bases if all(b.get(k) == g.get(k) for k in keys)]
        if hit:
            return hit[0]
    return None


def _row(g: dict[str, Any], base: dict[str, Any] | None, is_base: bool, higher: bool,
         min_effect: float) -> dict[str, Any]:
    d = g["described"]
    bmean = base["described"].mean if base is not None else None
    if is_base:
        ci = DeltaCI(0.0 if d.mean is not None else None, None, None, "none", None, None)
    elif base is None:
        ci = DeltaCI(None, None, None, "none", None, None)
    else:
        ci = delta_ci(g["values"], base["values"], g["seeds"], base["seeds"])
    k = None if is_base else needed(ci, bmean, min_effect)

    def pct(x: float | None) -> float | None:
        return None if x is None or not bmean else 100.0 * x / bmean

    return {"n": d.n, "mean": d.mean, "std": d.std, "is_baseline": is_base,
            "delta": ci.delta, "delta_pct": pct(ci.delta), "ci_low": ci.low,
            "ci_high": ci.high, "ci_low_pct": pct(ci.low), "ci_high_pct": pct(ci.high),
            "ci_method": ci.method,
            "verdict": verdict(ci, is_baseline=is_base, n=d.n, base_mean=bmean,
                               higher_is_better=higher, min_effect=min_effect, k=k),
            "seeds_needed": k}


def compare(values: pl.DataFrame, metric: str, baseline: str | None, *,
            states: Sequence[str] = RESULT_STATES, min_effect: float = 0.01,
            higher: bool | None = None) -> pl.DataFrame:
    """Per group (declared order): INFO, group_key, n_diverged, STAT_COLUMNS, metric,
    baseline. ``values``: long frame (run_id, seed, status, name, value, group_key, INFO...)
    as results_db.frames.run_values returns it."""
    import polars as pl

    if not 0 < min_effect < math.inf:
        raise ValueError(f"min_effect: a relative effect > 0 (0.01 = 1 %), got {min_effect}")
    higher = higher_is_better(metric) if higher is None else higher
    states = [parse_status(s, "states").value for s in states]
    groups = _groups(values.filter(pl.col("name") == metric), states)
    for g in groups:
        g["described"] = describe(g["values"])
    bases = [g for g in groups if baseline is not None and g["variant"] == baseline]
    axes = [c for c in DIMENSIONS if len({b.get(c) for b in bases}) > 1]
    rows = []
    for g in groups:
        is_base = baseline is not None and g["variant"] == baseline
        base = g if is_base else _baseline_of(g, bases, axes)
        info = {k: v for k, v in g.items() if k not in ("seeds", "values", "described")}
        rows.append({**info, **_row(g, base, is_base, higher, min_effect),
                     "metric": metric, "baseline": baseline})
    return _frame(rows)


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    import polars as pl

    schema = {"n": pl.Int64, "mean": pl.Float64, "std": pl.Float64, "is_baseline": pl.Boolean,
              **{c: pl.Float64 for c in STAT_COLUMNS if c.startswith(("delta", "ci_")) and
                 c != "ci_method"},
              "ci_method": pl.String, "verdict": pl.String, "seeds_needed": pl.Int64,
              "lr": pl.Float64, "variant": pl.String, "group_key": pl.String,
              "n_diverged": pl.Int64, "metric": pl.String, "baseline": pl.String}
    if not rows:
        return pl.DataFrame(schema={**{c: pl.String for c in INFO}, **schema})
    return pl.DataFrame(rows, infer_schema_length=None).with_columns(
        pl.col(c).cast(t) for c, t in schema.items())


def rank(table: pl.DataFrame, higher: bool) -> pl.Series:
    """1 = best mean (ties share the smaller rank); null where there is no mean."""
    import polars as pl

    return table["mean"].rank("min", descending=higher).cast(pl.Int64)


# A gate's own fields are null on ungated rows ("not applicable"): only their non-null values
# tell rows apart. Elsewhere null is a value (no MoE, no SwitchHead, no gate at all).
_NULL_IS_NA = ("gate_granularity", "gate_sharing", "gate_combine", "gate_activation",
               "gate_input_dependent")


def varying(table: pl.DataFrame, exclude: Sequence[str] = ("lr",)) -> list[str]:
    """The DIMENSIONS columns whose value differs between rows (what tells rows apart)."""
    out = []
    for c in DIMENSIONS:
        if c not in table.columns or c in exclude:
            continue
        col = table[c].drop_nulls() if c in _NULL_IS_NA else table[c]
        if col.n_unique() > 1:
            out.append(c)
    return out
