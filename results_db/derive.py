"""Derived results: max_stable_lr (issue 5) -- the largest learning rate a config tolerates.

Ladder (grouping key): runs of one sweep whose configs are equal once ``seed``, ``train.lr``
and ``train.min_lr`` are removed (runs.lr_group_key, results_db/dims.py): the same variant at
different learning rates, whatever its name.

Per LR of a ladder the seeds are pooled: the LR is *diverged* when any seed diverged (run
status ``diverged``, a ``stability/diverged`` summary > 0, or a NaN/inf final metric). Among
the non-diverged LRs, ``best`` is the lowest mean ``val/loss``; an LR is *stable* when it did
not diverge and its mean is within ``tolerance`` (relative, default 5%) of ``best``:
``mean <= best * (1 + tolerance)``. ``max_stable_lr`` is the largest stable LR. The tolerance
catches LRs that survive but train badly (loss plateaus after spikes); 5% of a val/loss near 3
nats is ~16% in perplexity, loose enough that seed noise never disqualifies an LR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import Engine

if TYPE_CHECKING:
    import polars as pl


def _per_run(engine: Engine, sweep: str, metric: str) -> pl.DataFrame:
    from results_db.query import frame

    return frame(engine, """SELECT r.id AS run_id, r.variant AS variant, r.lr AS lr,
          r.lr_group_key AS lr_group_key, r.status AS status, s.value AS value,
          d.value AS diverged_flag
        FROM runs r JOIN sweeps w ON w.id = r.sweep_id
        LEFT JOIN summaries s ON s.run_id = r.id AND s.name = :metric
        LEFT JOIN summaries d ON d.run_id = r.id AND d.name = 'stability/diverged'
        WHERE w.name = :sweep AND r.status IN ('succeeded', 'diverged') AND r.lr IS NOT NULL
        ORDER BY r.id""", {"sweep": sweep, "metric": metric})


def lr_table(engine: Engine, sweep: str, metric: str = "val/loss",
             tolerance: float = 0.05) -> pl.DataFrame:
    """One row per (ladder, lr): mean metric over seeds, n, diverged, best, stable."""
    import polars as pl

    runs = _per_run(engine, sweep, metric).with_columns(
        pl.col("lr").cast(pl.Float64), pl.col("value").cast(pl.Float64),
        pl.col("diverged_flag").cast(pl.Float64))
    if runs.height == 0:
        return pl.DataFrame(schema={"lr_group_key": pl.String, "variant": pl.String,
                                    "lr": pl.Float64, "mean": pl.Float64, "n": pl.Int64,
                                    "diverged": pl.Boolean, "best": pl.Float64,
                                    "stable": pl.Boolean})
    bad = ((pl.col("status") == "diverged") | (pl.col("diverged_flag").fill_null(0) > 0) |
           pl.col("value").is_null() | pl.col("value").is_infinite())
    per_lr = (runs.with_columns(bad=bad)
              .group_by("lr_group_key", "lr")
              .agg(variant=pl.col("variant").unique().sort().str.join(","),
                   mean=pl.col("value").filter(~pl.col("bad")).mean(),
                   n=pl.len().cast(pl.Int64), diverged=pl.col("bad").any()))
    best = pl.col("mean").filter(~pl.col("diverged")).min().over("lr_group_key")
    return (per_lr.with_columns(best=best)
            .with_columns(stable=~pl.col("diverged") &
                          (pl.col("mean") <= pl.col("best") * (1 + tolerance)))
            .sort("lr_group_key", "lr"))


def max_stable_lr(engine: Engine, sweep: str, tolerance: float = 0.05,
                  metric: str = "val/loss") -> pl.DataFrame:
    """Per ladder: variant, lrs (tested, ascending), n_lrs, max_stable_lr, best_lr (lowest
    mean), min_diverged_lr, and the ``metric`` mean at max_stable_lr."""
    import polars as pl

    if not 0 <= tolerance < 10:
        raise ValueError(f"max_stable_lr: tolerance is a relative fraction (0.05 = 5%), "
                         f"got {tolerance}")
    t = lr_table(engine, sweep, metric, tolerance)
    stable = pl.col("stable").fill_null(False)
    return (t.group_by("lr_group_key", maintain_order=True)
            .agg(variant=pl.col("variant").unique().sort().str.join(","),
                 lrs=pl.col("lr").sort(), n_lrs=pl.len().cast(pl.Int64),
                 max_stable_lr=pl.col("lr").filter(stable).max(),
                 best_lr=pl.col("lr").filter(pl.col("mean") == pl.col("best")).first(),
                 min_diverged_lr=pl.col("lr").filter(pl.col("diverged")).min(),
                 value_at_max=pl.col("mean").filter(stable).sort_by(
                     pl.col("lr").filter(stable)).last())
            .sort("variant"))
