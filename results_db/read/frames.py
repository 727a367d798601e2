"""The reads behind results_db/analysis: the sweep's runs with their metrics as one wide
polars frame, the label of each seed group, each variant's first run.

Only SQL lives here; what the numbers mean (baseline, deltas, CIs, verdicts, effects, LR
stability) is decided in results_db/analysis/ over these frames.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import polars as pl
from sqlalchemy import Engine

from contract import dimensions
from contract.states import DONE_OK
from results_db.schema.vocab import DIMENSIONS
from results_db.sqlread import frame, in_list

# Per run: what labels and groups it (the variant's dimensions, its seed-replicate group and
# LR ladder) and its parameter counts.
RUN_INFO: tuple[str, ...] = ("variant", "lr", "group_key", "lr_group_key",
                             *[d for d in DIMENSIONS if d != "lr"], "n_gates",
                             "params_total", "params_gates")
# What the baseline rule reads of every run of a sweep (any state).
BASELINE_COLUMNS: tuple[str, ...] = ("id", "variant", "n_gates", "gate_position",
                                     "nonlinearity", "switch_head", "nsa", "norm_style",
                                     "clip_residual", "n_head", "n_kv_head", "moe_experts",
                                     "params_total")
# SQL text has no result types: each dimension's from its kind (contract/dimensions.py)
_DTYPE = {"int": "Int64", "float": "Float64", "bool": "Boolean"}
_CASTS = {**{d.column: _DTYPE[d.kind] for d in dimensions.TABLE if d.kind in _DTYPE},
          "value": "Float64", "params_total": "Int64", "params_gates": "Int64",
          "n_gates": "Int64", "seed": "Int64", "run_id": "Int64"}


def _typed(df: pl.DataFrame, floats: Sequence[str] = ()) -> pl.DataFrame:
    """SQL text has no result types (and SQLite booleans are ints): cast the known columns
    and ``floats``; every other column is text. Not strict: SQLite stores whatever a writer
    gave (text in a REAL column), and such a value is missing, not a crash of every table."""
    casts = {**{c: getattr(pl, t) for c, t in _CASTS.items()}, **{c: pl.Float64 for c in floats}}
    return df.with_columns(pl.col(c).cast(casts.get(c, pl.String), strict=False)
                           for c in df.columns)


RUN_KEYS: tuple[str, ...] = ("run_id", "group_key", "lr_group_key", "variant", "lr", "seed",
                             "status")


def _first_ids(by: str, st: str | None) -> str:
    """Subquery: the smallest run id per ``by`` among the sweep's runs (with a status in the
    bound list ``st`` unless it is None)."""
    where = f" AND f.status IN ({st})" if st is not None else ""
    return (f"SELECT MIN(f.id) FROM runs f JOIN sweeps fw ON fw.id = f.sweep_id "
            f"WHERE fw.name = :sweep{where} GROUP BY f.{by}")


def runs_wide(engine: Engine, sweep: str, metrics: Sequence[str],
              states: Collection[str] = DONE_OK,
              keys: Sequence[str] = RUN_KEYS) -> pl.DataFrame:
    """One row per run of ``sweep`` in ``states``, by id: ``keys`` (some of RUN_KEYS: every
    cell fetched costs, so a caller asks for what it reads), then one Float64 column
    per metric (named by it; null when the run has no such summary, or it was NaN on SQLite).
    One query, one row per run: each metric is a scalar subquery on the summaries' (run_id,
    name) key -- 4x faster than a GROUP BY pivot on SQLite and far fewer Python objects than
    a long (run, name, value) frame (the cost here is per cell fetched, not SQLite's)."""
    names = list(dict.fromkeys(metrics))
    clash = [m for m in names if m in RUN_KEYS]
    if clash:
        raise ValueError(f"metrics: {clash} collide with the run columns {RUN_KEYS}")
    unknown = [k for k in keys if k not in RUN_KEYS]
    if unknown:
        raise ValueError(f"keys: unknown {unknown}; expected some of {RUN_KEYS}")
    params: dict[str, Any] = {"sweep": sweep}
    st = in_list("st", list(states), params)
    params.update({f"m{i}": m for i, m in enumerate(names)})
    values = "".join(f", (SELECT s.value FROM summaries s WHERE s.run_id = r.id "
                     f"AND s.name = :m{i}) AS v{i}" for i in range(len(names)))
    select_cols = ", ".join(f"r.{'id' if k == 'run_id' else k} AS {k}" for k in keys)
    df = frame(engine, f"""SELECT {select_cols}{values}
      FROM runs r JOIN sweeps w ON w.id = r.sweep_id
      WHERE w.name = :sweep AND r.status IN ({st}) ORDER BY r.id""", params)
    cols = [f"v{i}" for i in range(len(names))]
    return _typed(df, cols).rename(dict(zip(cols, names, strict=True)))


def group_info(engine: Engine, sweep: str,
               states: Collection[str] = DONE_OK) -> pl.DataFrame:
    """One row per seed group (group_key) of ``sweep``'s runs in ``states``, in order of its
    first run: group_key and RUN_INFO of that first run (what labels the group)."""
    params: dict[str, Any] = {"sweep": sweep}
    st = in_list("st", list(states), params)
    cols = ", ".join(f"r.{c} AS {c}" for c in RUN_INFO if c != "group_key")
    df = frame(engine, f"""SELECT r.group_key AS group_key, {cols} FROM runs r
      WHERE r.id IN ({_first_ids("group_key", st)}) ORDER BY r.id""", params)
    return _typed(df)


def first_runs(engine: Engine, sweep: str) -> pl.DataFrame:
    """The first run (smallest id) of each variant of ``sweep``, any state: BASELINE_COLUMNS
    (what the baseline rule reads; it looks at each variant's first run only)."""
    cols = ", ".join(f"r.{c} AS {c}" for c in BASELINE_COLUMNS)
    df = frame(engine, f"""SELECT {cols} FROM runs r
      WHERE r.id IN ({_first_ids("variant", None)}) ORDER BY r.id""", {"sweep": sweep})
    return _typed(df)



def sweep_attempts(engine: Engine, sweep: str) -> pl.DataFrame:
    """Every attempt of ``sweep``'s runs: run_id, started, ended (null while running) and the
    run's ``resources.gpus`` as stored in its config (what a decide: budget spends)."""
    df = frame(engine, """SELECT a.run_id AS run_id, a.started AS started, a.ended AS ended,
      r.config AS config FROM attempts a JOIN runs r ON r.id = a.run_id
      JOIN sweeps w ON w.id = r.sweep_id WHERE w.name = :sweep ORDER BY a.id""",
               {"sweep": sweep})
    if df.height == 0:
        return pl.DataFrame(schema={"run_id": pl.Int64, "started": pl.Datetime("us", "UTC"),
                                    "ended": pl.Datetime("us", "UTC"), "gpus": pl.Float64})
    gpus = pl.col("config").str.json_path_match("$.resources.gpus").cast(pl.Float64,
                                                                        strict=False)
    utc = pl.Datetime("us", "UTC")
    when = {c: pl.col(c).cast(pl.String).str.to_datetime(time_zone="UTC", strict=False)
            if df.schema[c] == pl.String else pl.col(c).cast(utc)  # no value yet: Null
            if df.schema[c] == pl.Null else pl.col(c).dt.replace_time_zone("UTC")
            for c in ("started", "ended")}
    return df.select(pl.col("run_id").cast(pl.Int64), **when, gpus=gpus.fill_null(0.0))
