"""How each row of an adaptive (``decide:``) sweep narrowed: its anytime-valid interval read on
the sweep's first k seeds, for every k it has run -- what the dashboard draws beside the
current reading (db.decide_rows).

The reading at each k is db.decide_rows' own rule (results_db.analysis.sequential.read_rows
over the runs of seeds < k), not a copy of it: the intervals are valid at every look, so
drawing every one of them is what they are for. Seeds are given in order (0, 1, 2, ...;
orchestrator/run/driver/adaptive.py), so "the first k seeds" is the sweep's state after its k-th.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from results_db.analysis.decide_rule import DecideRule
from results_db.analysis.sequential import read_rows
from results_db.read.frames import group_info, runs_wide

if TYPE_CHECKING:
    from results_db import ResultsDB

PATH_COLUMNS = ("variant", "lr", "group_key", "seeds", "n", "mean", "low", "high", "verdict")
READ_KEYS = ("run_id", "group_key", "seed", "status")  # what read_rows reads of each run


def interval_path(db: ResultsDB, sweep: str, rule: DecideRule) -> pl.DataFrame:
    """One row per (decide row, k): ``seeds`` = k (the sweep's seeds 0..k-1 read), ``n`` the
    row's paired seeds among them, ``mean``/``low``/``high`` of the difference vs the
    baseline (fractions when the rule is relative) and the verdict at that look; k from the
    first look with any paired seed to the sweep's last seed."""
    runs = runs_wide(db.reader, sweep, [rule.metric], keys=READ_KEYS)
    empty = pl.DataFrame(schema={"variant": pl.String, "lr": pl.Float64,
                                 "group_key": pl.String, "seeds": pl.Int64, "n": pl.Int64,
                                 "mean": pl.Float64, "low": pl.Float64, "high": pl.Float64,
                                 "verdict": pl.String})
    if runs.is_empty():
        return empty
    info = group_info(db.reader, sweep)
    base = db.baseline(sweep)
    values = runs.select(*READ_KEYS, value=pl.col(rule.metric))
    seeds = sorted(int(s) for s in values["seed"].unique().to_list())
    parts = []
    for k in range(1, len(seeds) + 1):
        rows = read_rows(values.filter(pl.col("seed").is_in(seeds[:k])), info, base, rule)
        if rows.height:
            parts.append(rows.filter(pl.col("n") > 0).select(
                "variant", pl.col("lr").cast(pl.Float64), "group_key",
                pl.lit(k, pl.Int64).alias("seeds"), pl.col("n").cast(pl.Int64),
                *[pl.col(c).cast(pl.Float64) for c in ("mean", "low", "high")], "verdict"))
    return pl.concat(parts) if parts else empty
