"""Runs grouped by any config key (the dashboard's Explore page, W&B-style "group by"): per
value of the key, how many runs, and the mean, standard deviation, min and max of a metric.

Descriptive only: a group pools whatever runs share the key's value (other keys, LRs and seeds
mixed), so it carries no CI or verdict -- comparisons against the baseline are the
leaderboard's (results_db/analysis/). It lives here because results_db owns every number the
pages show; the page only formats it.
"""

from __future__ import annotations

import polars as pl

GROUP_COLUMNS = ("key", "group", "runs", "n", "mean", "std", "min", "max")


def group_stats(frame: pl.DataFrame, by: str, value: str) -> pl.DataFrame:
    """Per distinct value of column ``by`` of ``frame`` (one row per run): ``key`` (the value,
    typed as ``by``), ``group`` (as text, '–' for none), ``runs`` (rows), ``n`` (finite
    values of ``value``), and their mean, std (ddof 1; null below two values), min and max.
    Groups in the key's order: numbers numerically, text alphabetically, '–' last."""
    if by not in frame.columns or value not in frame.columns:
        missing = [c for c in (by, value) if c not in frame.columns]
        raise ValueError(f"group_stats: no column {', '.join(map(repr, missing))}; the frame "
                         f"has {', '.join(frame.columns)}")
    v = pl.col(value).cast(pl.Float64)
    finite = v.filter(v.is_finite())
    out = frame.group_by(pl.col(by).alias("_key")).agg(
        pl.len().alias("runs"), finite.len().alias("n"), finite.mean().alias("mean"),
        finite.std(ddof=1).alias("std"), finite.min().alias("min"), finite.max().alias("max"))
    numeric = frame.schema[by].is_numeric()
    out = out.with_columns(
        _none=pl.col("_key").is_null(),
        group=pl.col("_key").cast(pl.String).fill_null("–")).sort(
        "_none", "_key" if numeric else "group").rename({"_key": "key"})
    return out.select(*GROUP_COLUMNS).with_columns(pl.col("runs", "n").cast(pl.Int64))
