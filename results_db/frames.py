"""The reads behind results_db/analysis: finished runs x metrics as one long polars frame.

Only SQL lives here; what the numbers mean (baseline, deltas, CIs, verdicts, effects, LR
stability) is decided in results_db/analysis/ over these frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from results_db.sqlread import frame, in_list
from results_db.vocab import DIMENSIONS, FINISHED_STATES

if TYPE_CHECKING:
    import polars as pl

# Per run: what labels and groups it (the variant's dimensions, its seed-replicate group and
# LR ladder) and its parameter counts.
RUN_INFO: tuple[str, ...] = ("variant", "lr", "group_key", "lr_group_key",
                             *[d for d in DIMENSIONS if d != "lr"], "n_gates",
                             "params_total", "params_gates")
# What the baseline rule reads of every run of a sweep (any state).
BASELINE_COLUMNS: tuple[str, ...] = ("id", "variant", "n_gates", "gate_position",
                                     "nonlinearity", "switch_head", "norm_style",
                                     "clip_residual", "n_head", "n_kv_head", "moe_experts",
                                     "params_total")
_CASTS = {"lr": "Float64", "value": "Float64", "params_total": "Int64", "params_gates": "Int64",
          "n_gates": "Int64", "n_head": "Int64", "n_kv_head": "Int64", "moe_experts": "Int64",
          "n_layer": "Int64", "d_model": "Int64", "steps": "Int64", "seed": "Int64",
          "run_id": "Int64", "clip_residual": "Float64", "gate_input_dependent": "Boolean",
          "qk_norm": "Boolean"}


def _typed(df: pl.DataFrame) -> pl.DataFrame:
    """SQL text has no result types (and SQLite booleans are ints): cast the known columns;
    every other column is text."""
    import polars as pl

    casts = {c: getattr(pl, t) for c, t in _CASTS.items()}
    return df.with_columns(pl.col(c).cast(casts.get(c, pl.String)) for c in df.columns)


def run_values(engine: Engine, sweep: str, metrics: Sequence[str],
               states: Sequence[str] = FINISHED_STATES) -> pl.DataFrame:
    """One row per run of ``sweep`` in ``states`` and metric: sweep, RUN_INFO, run_id, seed,
    status, name, value (null when the run has no such summary, or its value was NaN). Two
    narrow queries (runs, then their summaries) joined here: repeating the run columns per
    metric in SQL would multiply the rows fetched."""
    import polars as pl

    params: dict[str, Any] = {"sweep": sweep}
    st = in_list("st", list(states), params)
    names = in_list("m", list(metrics), params)
    cols = ", ".join(f"r.{c}" for c in RUN_INFO)
    runs = frame(engine, f"""SELECT w.name AS sweep, {cols}, r.id AS run_id, r.seed AS seed,
        r.status AS status FROM runs r JOIN sweeps w ON w.id = r.sweep_id
      WHERE r.status IN ({st}) AND w.name = :sweep ORDER BY r.id""", params)
    values = frame(engine, f"""SELECT s.run_id AS run_id, s.name AS name, s.value AS value
      FROM summaries s JOIN runs r ON r.id = s.run_id JOIN sweeps w ON w.id = r.sweep_id
      WHERE s.name IN ({names}) AND r.status IN ({st}) AND w.name = :sweep""", params)
    if runs.height == 0:
        empty = {c: [] for c in ("sweep", *RUN_INFO, "run_id", "seed", "status", "name",
                                 "value")}
        return _typed(pl.DataFrame(empty))
    wanted = pl.DataFrame({"name": list(dict.fromkeys(metrics))}, schema={"name": pl.String})
    grid = _typed(runs).join(wanted, how="cross")  # every run x every asked metric
    return grid.join(_typed(values), on=["run_id", "name"], how="left").sort("run_id", "name")


def wide_values(values: pl.DataFrame) -> pl.DataFrame:
    """run_values pivoted: one row per run, one column per metric name."""
    import polars as pl

    keys = [c for c in values.columns if c not in ("name", "value")]
    if values.height == 0:
        return values.drop("name", "value")
    piv = values.pivot(on="name", index="run_id", values="value", aggregate_function="first")
    runs = values.select(keys).unique("run_id", maintain_order=True)
    return runs.join(piv, on="run_id", how="left").with_columns(
        pl.col(c).cast(pl.Float64) for c in piv.columns if c != "run_id")
