"""The ablation table: the comparison of several metrics side by side, one row per group."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from results_db.analysis.compare import INFO

PER_METRIC = ("n", "mean", "std", "delta", "delta_pct", "ci_low", "ci_high", "ci_low_pct",
              "ci_high_pct", "ci_method", "verdict", "seeds_needed")


def pm_text(mean: float | None, std: float | None) -> str:
    """'12.3 ± 0.41' (4 significant digits, 2 for the std); the mean alone without a std."""
    if mean is None:
        return "—"
    if std is None:
        return f"{mean:.4g}"
    return f"{mean:.4g} ± {std:.2g}"


def ablation(tables: Sequence[pl.DataFrame], metrics: Sequence[str],
             stability: pl.DataFrame | None) -> pl.DataFrame:
    """Join compare() tables (one per metric, same groups) wide on group_key."""
    first = tables[0]
    keys = ["group_key", *[c for c in INFO if c in first.columns], "is_baseline"]
    out = first.select(keys)
    if out.height == 0:
        return out.with_columns(n=pl.lit(None, pl.Int64), n_diverged=pl.lit(None, pl.Int64))
    out = out.with_row_index("_declared")
    n = pl.max_horizontal([pl.col(f"{m}:n") for m in metrics])
    for m, t in zip(metrics, tables, strict=True):
        part = t.select("group_key", "n_diverged", *[pl.col(c).alias(f"{m}:{c}")
                                                     for c in PER_METRIC])
        out = out.join(part.drop("n_diverged") if "n_diverged" in out.columns else part,
                       on="group_key", how="left", maintain_order="left")
        # text formatting (%g) has no polars expression: one comprehension per column
        text = [pm_text(a, b) for a, b in zip(out[f"{m}:mean"].to_list(),
                                              out[f"{m}:std"].to_list(), strict=True)]
        out = out.with_columns(pl.Series(f"{m}:text", text, dtype=pl.String))
    out = out.with_columns(n=n)
    if stability is not None:
        msl = stability.select("lr_group_key", "max_stable_lr")
        out = out.join(msl, on="lr_group_key", how="left", maintain_order="left")
    order = pl.col("is_baseline").not_()
    return out.sort(order, "_declared").drop("_declared")
