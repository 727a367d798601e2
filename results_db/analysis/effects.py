"""Main effects of each dimension of a factorial sweep (the ablation researcher's version of
W&B's parameter importance).

For each dimension that takes >= 2 values among the non-baseline rows (gate_position,
gate_granularity, gate_activation, ...; ``lr`` excluded: every delta is already taken at the
baseline's own learning rate) and each of its values: the mean of ``delta_pct`` (vs the
baseline, compare.py) over the rows with that value -- i.e. averaged over the other
dimensions -- with a 95 % Student-t CI over those rows (df = rows - 1; the row-to-row spread
holds both seed noise and the other dimensions' influence). A value seen in one row only
keeps that row's own delta CI. Null values (e.g. gate_granularity of an ungated variant:
"not applicable") are not a level. Verdict: ``better``/``worse`` when the CI excludes 0,
``n = 1`` without a CI, else ``within noise``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from results_db.analysis.compare import varying
from results_db.analysis.stats import mean_ci

if TYPE_CHECKING:
    import polars as pl

COLUMNS = ("dimension", "value", "n_variants", "n_runs", "mean_delta_pct", "ci_low_pct",
           "ci_high_pct", "verdict")


def _verdict(low: float | None, high: float | None, higher: bool) -> str:
    if low is None or high is None:
        return "n = 1"
    if high < 0 or low > 0:
        return "better" if (high < 0) != higher else "worse"
    return "within noise"


def _level(dim: str, value: Any, rows: pl.DataFrame, higher: bool) -> dict[str, Any]:
    deltas = [float(x) for x in rows["delta_pct"].to_list()]
    if len(deltas) >= 2:
        low, high = mean_ci(deltas)
    else:
        low, high = rows["ci_low_pct"][0], rows["ci_high_pct"][0]
    return {"dimension": dim, "value": str(value), "n_variants": rows["variant"].n_unique(),
            "n_runs": int(rows["n"].sum()), "mean_delta_pct": sum(deltas) / len(deltas),
            "ci_low_pct": low, "ci_high_pct": high, "verdict": _verdict(low, high, higher)}


def main_effects(table: pl.DataFrame, higher: bool) -> pl.DataFrame:
    """``table``: compare.compare() output. One row per (dimension, value), dimensions in
    DIMENSIONS order, values sorted."""
    import polars as pl

    rows = table.filter(~pl.col("is_baseline") & pl.col("delta_pct").is_not_null())
    out = []
    for dim in varying(rows, exclude=("lr",)):
        levels = rows.filter(pl.col(dim).is_not_null())
        if levels[dim].n_unique() < 2:
            continue
        for value in sorted(levels[dim].unique().to_list(), key=str):
            out.append(_level(dim, value, levels.filter(pl.col(dim) == value), higher))
    schema = {"dimension": pl.String, "value": pl.String, "n_variants": pl.Int64,
              "n_runs": pl.Int64, "mean_delta_pct": pl.Float64, "ci_low_pct": pl.Float64,
              "ci_high_pct": pl.Float64, "verdict": pl.String}
    return pl.DataFrame(out, schema=schema)
