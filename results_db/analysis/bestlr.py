"""Each variant at its own best LR against the baseline at *its* best LR (the dashboard's
"best vs best"): pure polars over db.leaderboard and the finished runs' values. The Δ and its
95 % CI are ``stats.delta_ci`` (paired by seed where the seed sets match, else Welch); the
percentages are of |baseline mean|. dashboard/compare.py only formats the result."""

from __future__ import annotations

import polars as pl

from results_db.analysis.stats import delta_ci


def _best(board: pl.DataFrame, ascending: bool) -> pl.DataFrame:
    """Each variant's row with its best mean (lowest when ``ascending``)."""
    return board.filter(pl.col("mean").is_not_null()).sort(
        "mean", descending=not ascending).group_by("variant", maintain_order=True).first()


def best_vs_best(board: pl.DataFrame, values: pl.DataFrame, ascending: bool,
                 baseline: str | None) -> pl.DataFrame:
    """Each variant at its own best LR vs the baseline at its own best LR.

    board: db.leaderboard (variant, lr, group_key, n, mean, ...); values: (group_key, seed,
    value) of the finished runs. Returns (variant, best lr, baseline best lr, n, delta,
    delta_pct, ci_low_pct, ci_high_pct, ci_method), one row per variant but the baseline;
    empty when the baseline has no finished run."""
    best = _best(board, ascending)
    schema = {"variant": pl.String, "best lr": pl.Float64, "baseline best lr": pl.Float64,
              "n": pl.Int64, "delta": pl.Float64, "delta_pct": pl.Float64,
              "ci_low_pct": pl.Float64, "ci_high_pct": pl.Float64, "ci_method": pl.String}
    base = best.filter(pl.col("variant") == baseline)
    if baseline is None or base.is_empty():
        return pl.DataFrame(schema=schema)
    b = base.row(0, named=True)
    seeds = {g: grp.sort("seed") for (g,), grp in values.group_by("group_key")}
    bv = seeds.get(b["group_key"], values.head(0))
    m = b["mean"]

    def pct(v: float | None) -> float | None:
        return None if v is None or not m else 100.0 * v / abs(m)

    rows = []
    for r in best.filter(pl.col("variant") != baseline).iter_rows(named=True):
        xv = seeds.get(r["group_key"], values.head(0))
        ci = delta_ci(xv["value"].to_list(), bv["value"].to_list(), xv["seed"].to_list(),
                      bv["seed"].to_list())
        rows.append({"variant": r["variant"], "best lr": r["lr"], "baseline best lr": b["lr"],
                     "n": r["n"], "delta": ci.delta, "delta_pct": pct(ci.delta),
                     "ci_low_pct": pct(ci.low), "ci_high_pct": pct(ci.high),
                     "ci_method": ci.method})
    return pl.DataFrame(rows, schema=schema)
