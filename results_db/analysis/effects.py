"""Main effects of each dimension of a factorial sweep, from a least-squares model fit (the
ablation researcher's version of W&B's parameter importance).

Per *context* -- one point of the sweep's axes (compare.match_axes: the learning rate and any
other swept axis; a delta never crosses them) -- and per dimension ``d`` that takes >= 2
non-null values among the non-baseline groups there (gate_position, gate_granularity,
nonlinearity, n_kv_head, ...; the axes themselves are not dimensions here):

- **the fit**: ordinary least squares on the *runs* (every finished seed with a finite value)
  of the baseline group and of the variant groups whose ``d`` is set::

      value ~ 1 + C(d) + C(cell) [+ C(seed)]

  ``C(d)``: the dimension's level (the baseline's own value, usually "no gate", is a level
  too); ``C(cell)``: the combination of every other dimension (what the other dimensions do,
  without assuming they add up among themselves); ``C(seed)``: a block per seed when every
  group in the fit ran the same seeds (the paired design: a seed's shared data order and
  init cancel, as in the leaderboard's paired CI). numpy least squares (SVD; a rank-deficient
  design is fine), residual df = runs - rank.
- **the main effect of level l**: its estimated marginal mean -- the fitted value at ``d = l``
  averaged with equal weight over the cells of the variant groups that have ``d`` set (and
  over the seeds) -- minus the fitted baseline, as a % of |baseline mean|, with the 95 %
  Student-t CI of that linear contrast (its variance from the fit's covariance). In a
  balanced design that is the marginal mean of the deltas with a CI on the fit's residual
  df (not on the number of rows); in an unbalanced one (a missing cell) it corrects for the
  other dimensions' composition, which a marginal mean does not.
- A contrast the design cannot estimate (the level never appears in a cell shared with the
  others) is ``not estimable``; a level seen in one variant group only is reported with its
  numbers but ``one variant``: one configuration is not a main effect.

Verdict: ``better``/``worse`` when the CI excludes 0, ``within noise`` when it lies within
+-min_effect (as a percentage: 1 % by default, the leaderboard's rule), ``no CI`` when the fit
leaves no residual df, else ``inconclusive``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from contract.analysis_defaults import MIN_EFFECT
from results_db.analysis.compare import _key, match_axes, varying
from results_db.analysis.stats import LEVEL, t_quantile
from results_db.analysis.verdict import interval_verdict
from results_db.schema.vocab import DIMENSIONS, RESULT_STATES

if TYPE_CHECKING:
    import numpy as np

# The conditions a main effect holds under travel with it: the context (lr and every
# other axis), the metric, and the seeds behind the level with whether the fit paired them.
COLUMNS = ("dimension", "value", "lr", "n_variants", "n_runs", "mean_delta_pct",
           "ci_low_pct", "ci_high_pct", "verdict", "df", "context", "metric", "n_seeds",
           "paired")
NA = "n/a"  # the level of a dimension a group does not set (a gate field of an ungated model)
ONE_VARIANT, NOT_ESTIMABLE, NO_CI = "one variant", "not estimable", "no CI"


def _schema() -> dict[str, Any]:
    return {"dimension": pl.String, "value": pl.String, "lr": pl.Float64,
            "n_variants": pl.Int64, "n_runs": pl.Int64, "mean_delta_pct": pl.Float64,
            "ci_low_pct": pl.Float64, "ci_high_pct": pl.Float64, "verdict": pl.String,
            "df": pl.Float64, "context": pl.String, "metric": pl.String, "n_seeds": pl.Int64,
            "paired": pl.Boolean}


def _text(v: Any) -> str:
    return NA if v is None else str(v)


def _dummies(labels: list[str]) -> np.ndarray:
    """Treatment-coded columns for ``labels`` (first level in order of appearance dropped)."""
    import numpy as np

    index = {lab: i for i, lab in enumerate(dict.fromkeys(labels))}
    codes = np.fromiter((index[lab] for lab in labels), np.int64, len(labels))
    out = np.zeros((len(labels), max(len(index) - 1, 0)))
    rows = np.nonzero(codes)[0]
    out[rows, codes[rows] - 1] = 1.0
    return out


class _Design:
    """value ~ 1 + C(d) + C(cell) [+ C(seed)], treatment coded, and the row vector of any
    (level, cell, seed) combination in the same coding."""

    def __init__(self, level: list[str], cell: list[str], seed: list[str] | None) -> None:
        self.factors = [("d", level), ("cell", cell)] + ([("seed", seed)] if seed else [])
        self.levels = {name: list(dict.fromkeys(lab)) for name, lab in self.factors}

    def row(self, **at: str) -> np.ndarray:
        import numpy as np

        parts = [np.ones(1)]
        for name, _ in self.factors:
            lv = self.levels[name]
            v = np.zeros(max(len(lv) - 1, 0))
            if (j := lv.index(at[name])) > 0:
                v[j - 1] = 1.0
            parts.append(v)
        return np.concatenate(parts)

    def matrix(self) -> np.ndarray:
        import numpy as np

        n = len(self.factors[0][1])
        return np.hstack([np.ones((n, 1)), *(_dummies(lab) for _, lab in self.factors)])


class _Fit:
    """OLS by one SVD of X: beta (minimum norm), rank, residual df and variance, and what the
    contrasts need -- the projection onto X's row space (estimability) and (X'X)^+."""

    def __init__(self, x: np.ndarray, y: np.ndarray) -> None:
        import numpy as np

        u, s, vt = np.linalg.svd(x, full_matrices=False)
        keep = s > s.max(initial=0.0) * max(x.shape) * np.finfo(float).eps
        self.rank = int(keep.sum())
        u, s, vt = u[:, keep], s[keep], vt[keep]
        self.beta = vt.T @ ((u.T @ y) / s)
        self.vt = vt
        self.xtx_pinv = (vt.T / s ** 2) @ vt
        self.df = len(y) - self.rank
        self.sigma2 = float(np.sum((y - x @ self.beta) ** 2) / self.df) if self.df > 0 else None

    def estimable(self, c: np.ndarray) -> bool:
        import numpy as np

        off = c - (c @ self.vt.T) @ self.vt
        return bool(np.linalg.norm(off) <= 1e-7 * max(1.0, float(np.linalg.norm(c))))


def _level_rows(groups: pl.DataFrame, runs: pl.DataFrame, dim: str, others: list[str],
                base_key: str) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The groups in the fit (baseline + variants with ``dim`` set) with their level and
    cell labels, and their runs; None without a baseline run or a variant run."""
    keep = groups.filter((pl.col("group_key") == base_key)
                         | (~pl.col("is_baseline") & pl.col(dim).is_not_null()))
    keep = keep.with_columns(
        _level=pl.Series([_text(v) for v in keep[dim].to_list()], dtype=pl.String),
        _cell=_key(keep, others) if others else pl.lit(""))
    r = runs.join(keep.select("group_key", "_level", "_cell", "is_baseline"), on="group_key")
    if r.filter(pl.col("is_baseline")).is_empty() or r.filter(~pl.col("is_baseline")).is_empty():
        return None
    return keep, r


def _effects_of(dim: str, keep: pl.DataFrame, r: pl.DataFrame, base_mean: float,
                higher: bool, min_effect: float) -> list[dict[str, Any]]:
    """One row per non-baseline level of ``dim`` (module docstring)."""
    import numpy as np
    seeds = r.group_by("group_key").agg(pl.col("seed").sort())
    same = (seeds["seed"].n_unique() == 1 and r["seed"].n_unique() >= 2
            and all(len(set(s)) == len(s) for s in seeds["seed"].to_list()))
    seed_lab = [str(s) for s in r["seed"].to_list()] if same else None
    design = _Design(r["_level"].to_list(), r["_cell"].to_list(), seed_lab)
    fit = _Fit(design.matrix(), r["value"].to_numpy().astype(np.float64))
    base = keep.filter(pl.col("is_baseline")).row(0, named=True)
    seed_levels: list[str] = design.levels["seed"] if same else [""]

    def mean_row(level: str, cells: list[str]) -> np.ndarray:
        rows = [design.row(d=level, cell=c, **({"seed": s} if same else {}))
                for c in cells for s in seed_levels]
        return np.asarray(np.mean(rows, axis=0))

    variants = keep.filter(~pl.col("is_baseline"))
    cells = list(dict.fromkeys(variants["_cell"].to_list()))
    counts = {row["_level"]: row for row in variants.group_by("_level").agg(
        n_groups=pl.len(), n_variants=pl.col("variant").n_unique()).iter_rows(named=True)}
    var_runs = r.filter(~pl.col("is_baseline")).group_by("_level")
    n_runs = dict(var_runs.len().iter_rows())
    n_seeds = dict(var_runs.agg(pl.col("seed").n_unique()).iter_rows())
    l_base = mean_row(base["_level"], [base["_cell"]])
    t = t_quantile(0.5 + LEVEL / 2, fit.df) if fit.sigma2 is not None else None
    scale = 100.0 / abs(base_mean) if base_mean else None
    out = []
    for level in sorted(counts):
        row: dict[str, Any] = {"dimension": dim, "value": level,
                               "n_variants": counts[level]["n_variants"],
                               "n_runs": n_runs.get(level, 0), "df": float(fit.df),
                               "n_seeds": n_seeds.get(level, 0), "paired": same}
        c = mean_row(level, cells) - l_base
        if not fit.estimable(c):
            out.append({**row, "verdict": NOT_ESTIMABLE})
            continue
        est = float(c @ fit.beta)
        low = high = None
        if t is not None and fit.sigma2 is not None:
            half = t * float(np.sqrt(max(float(c @ fit.xtx_pinv @ c), 0.0) * fit.sigma2))
            low, high = est - half, est + half
        row.update(mean_delta_pct=_scaled(est, scale), ci_low_pct=_scaled(low, scale),
                   ci_high_pct=_scaled(high, scale),
                   verdict=_verdict(low, high, counts[level]["n_groups"], higher, min_effect,
                                    scale))
        out.append(row)
    return out


def _scaled(v: float | None, scale: float | None) -> float | None:
    return None if v is None or scale is None else v * scale


def _verdict(low: float | None, high: float | None, n_groups: int, higher: bool,
             min_effect: float, scale: float | None) -> str:
    """verdict.interval_verdict on the CI in % of |baseline mean| with the margin
    +-100 x min_effect %; none without a baseline mean to scale by."""
    if n_groups <= 1:
        return ONE_VARIANT
    if low is None or high is None:
        return NO_CI
    if scale is None:
        return interval_verdict(low, high, None, higher_is_better=higher)
    return interval_verdict(low * scale, high * scale, 100.0 * min_effect,
                            higher_is_better=higher)


def main_effects(table: pl.DataFrame, runs: pl.DataFrame, metric: str, higher: bool,
                 min_effect: float = MIN_EFFECT,
                 states: Sequence[str] = RESULT_STATES) -> pl.DataFrame:
    """``table``: compare.compare() output (one row per group, with is_baseline, mean,
    delta_pct and the dimension columns); ``runs``: the runs frame it was computed from
    (run_id, group_key, seed, status, ``metric``). One row per (context, dimension, level):
    COLUMNS, contexts in declared order, dimensions in DIMENSIONS order, levels sorted as
    text. ``lr`` is the context's learning rate, ``context`` all its axes in words; ``metric``,
    ``n_seeds`` (distinct seeds among the level's runs) and ``paired`` (the fit blocked by
    seed) are the rest of the condition the number holds under."""
    schema = _schema()
    if table.is_empty() or not table["is_baseline"].any():
        return pl.DataFrame(schema=schema)
    baseline = table.filter(pl.col("is_baseline"))["variant"][0]
    axes = match_axes(table, baseline)
    ok = (pl.col("status").is_in(list(states))
          & pl.col(metric).is_finite().fill_null(False))
    values = runs.filter(ok).select("group_key", "seed", value=pl.col(metric).cast(pl.Float64))
    t = table.with_columns(_ctx=_key(table, axes))
    rows: list[dict[str, Any]] = []
    for ctx in dict.fromkeys(t["_ctx"].to_list()):
        here = t.filter(pl.col("_ctx") == ctx)
        bases = here.filter(pl.col("is_baseline") & pl.col("mean").is_not_null())
        if bases.is_empty():
            continue
        base = bases.row(0, named=True)
        groups = here.filter(pl.col("is_baseline") & (pl.col("group_key") == base["group_key"])
                             | ~pl.col("is_baseline") & pl.col("delta_pct").is_not_null())
        variants = groups.filter(~pl.col("is_baseline"))
        dims = [d for d in varying(variants, exclude=axes)
                if variants[d].drop_nulls().n_unique() >= 2]
        label = ", ".join(f"{a} {_text(base[a])}" for a in axes if a in base)
        for dim in dims:
            others = [c for c in DIMENSIONS if c in groups.columns and c != dim
                      and c not in axes]
            fit = _level_rows(groups, values, dim, others, base["group_key"])
            if fit is None:
                continue
            for row in _effects_of(dim, *fit, base["mean"], higher, min_effect):
                rows.append({**row, "lr": base.get("lr"), "context": label,
                             "metric": metric})
    if not rows:
        return pl.DataFrame(schema=schema)
    return pl.DataFrame(rows, schema=schema).select(list(COLUMNS))
