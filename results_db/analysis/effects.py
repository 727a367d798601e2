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
``n = 1`` without a CI, ``within noise`` when the CI lies within +-min_effect (as a
percentage: 1 % by default, the leaderboard's rule), else ``inconclusive`` (the data cannot
tell: calling a CI of [-15 %, +10 %] "within noise" would claim an absence of effect).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from results_db.analysis.compare import varying
from results_db.analysis.stats import t_column

if TYPE_CHECKING:
    import polars as pl

COLUMNS = ("dimension", "value", "n_variants", "n_runs", "mean_delta_pct", "ci_low_pct",
           "ci_high_pct", "verdict")


def _levels(rows: pl.DataFrame, dim: str) -> pl.DataFrame:
    """One row per value of ``dim``: its rows' count k, mean and sd of delta_pct, and the
    single row's own CI (used when k = 1). ``value`` is Python's str() of the value (the
    distinct values are few), sorted as text."""
    import polars as pl

    levels = rows.filter(pl.col(dim).is_not_null())
    agg = levels.group_by(dim).agg(
        n_variants=pl.col("variant").n_unique().cast(pl.Int64),
        n_runs=pl.col("n").sum().cast(pl.Int64), k=pl.len().cast(pl.Int64),
        mean_delta_pct=pl.col("delta_pct").mean(), _sd=pl.col("delta_pct").std(),
        _low1=pl.col("ci_low_pct").first(), _high1=pl.col("ci_high_pct").first())
    text = pl.Series("value", [str(v) for v in agg[dim].to_list()], dtype=pl.String)
    return agg.with_columns(text, dimension=pl.lit(dim)).drop(dim).sort("value")


def _verdict(higher: bool, min_effect: float) -> pl.Expr:
    import polars as pl

    low, high = pl.col("ci_low_pct"), pl.col("ci_high_pct")
    margin = 100.0 * min_effect  # the CI columns are percentages
    return (pl.when(low.is_null() | high.is_null()).then(pl.lit("n = 1"))
            .when((high < 0) | (low > 0))
            .then(pl.when((high < 0) != higher).then(pl.lit("better")).otherwise(pl.lit("worse")))
            .when((-margin <= low) & (high <= margin)).then(pl.lit("within noise"))
            .otherwise(pl.lit("inconclusive")))


def main_effects(table: pl.DataFrame, higher: bool, min_effect: float = 0.01) -> pl.DataFrame:
    """``table``: compare.compare() output. One row per (dimension, value), dimensions in
    DIMENSIONS order, values sorted. Every level of every dimension at once: one group_by
    per dimension, the t quantiles once per distinct row count."""
    import polars as pl

    schema = {"dimension": pl.String, "value": pl.String, "n_variants": pl.Int64,
              "n_runs": pl.Int64, "mean_delta_pct": pl.Float64, "ci_low_pct": pl.Float64,
              "ci_high_pct": pl.Float64, "verdict": pl.String}
    rows = table.filter(~pl.col("is_baseline") & pl.col("delta_pct").is_not_null())
    parts = [_levels(rows, dim) for dim in varying(rows, exclude=("lr",))
             if rows[dim].drop_nulls().n_unique() >= 2]
    if not parts:
        return pl.DataFrame(schema=schema)
    out = pl.concat(parts, how="vertical_relaxed")
    k = pl.col("k")
    out = out.with_columns(_t=t_column(out.select(pl.when(k >= 2).then(k - 1)).to_series()))
    half = pl.col("_t") * pl.col("_sd") / pl.col("k").cast(pl.Float64).sqrt()
    mean = pl.col("mean_delta_pct")
    out = out.with_columns(
        ci_low_pct=pl.when(pl.col("k") >= 2).then(mean - half).otherwise(pl.col("_low1")),
        ci_high_pct=pl.when(pl.col("k") >= 2).then(mean + half).otherwise(pl.col("_high1")))
    return out.with_columns(verdict=_verdict(higher, min_effect)).select(list(schema)).cast(
        schema)
