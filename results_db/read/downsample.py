"""SQL for ``db.metrics``: whole series, or downsampled per (run, name) inside the database.

A series with more than ``max_points`` points is cut into ``nb = max_points // 4`` equal step
buckets; each bucket keeps its min, its max, its last point and, when it holds NaN (stored as
NULL), exactly one NULL point: its first (the divergence's onset; a NULL last point is not kept
besides it). A loss spike or a divergence is never averaged away, and a series returns at most
``max_points`` rows. Shorter series come back whole.

Why this shape: the old query ranked every raw point four times with window functions (sorts
of all stored points, 166 s for 100 runs x 100k steps). Now nothing sorts raw points:
  * series bounds (first/last step, "more than max_points?") are primary-key seeks;
  * SQLite: every bucket is a step range of the primary key (run_id, name, step); per bucket
    the min and the max are one range read each (its bare-column rule: ``SELECT step,
    MIN(value)`` returns the step of the min row), "does it hold a NULL?" rides along with the
    min, the last point is a seek, the first NULL is looked for only in buckets that hold one;
    the picked steps are joined back to ``metrics`` for their values;
  * PostgreSQL: one hash-aggregate pass per series with arg-min/arg-max as array aggregates.
The cost still grows with the points *read* (an exact min/max must see every point of a bucket),
no longer with sorting them: see docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from results_db.sqlread import frame
from results_db.write.rollup import BLOCK, TABLE, has_rollup

# The (run, name) step range of the current bucket ``b`` (bucket rows: run_id, name, lo, hi).
_RANGE = "m.run_id = b.run_id AND m.name = b.name AND m.step BETWEEN b.lo AND b.hi"


def _binds(prefix: str, values: Sequence[Any], params: dict[str, Any]) -> list[str]:
    names = []
    for i, v in enumerate(values):
        params[f"{prefix}{i}"] = v
        names.append(f":{prefix}{i}")
    return names


def _filters(run_ids: Sequence[int] | None, names: Sequence[str] | None,
             params: dict[str, Any]) -> str:
    conds = []
    if run_ids is not None:
        conds.append(f"run_id IN ({', '.join(_binds('r', run_ids, params)) or 'NULL'})")
    if names is not None:
        conds.append(f"name IN ({', '.join(_binds('n', names, params)) or 'NULL'})")
    return ("WHERE " + " AND ".join(conds)) if conds else ""


def _series_ctes(run_ids: Sequence[int] | None, names: Sequence[str] | None,
                 params: dict[str, Any]) -> str:
    """CTEs ``sel(run_id)`` and ``series(run_id, name)``: the (run, name) pairs to read.

    With ``names`` it is runs x names; without, each run's names are found by a recursive
    skip over the primary key (next name > previous: one index seek per name, not a scan)."""
    ids = "" if run_ids is None else \
        f" WHERE id IN ({', '.join(_binds('r', run_ids, params)) or 'NULL'})"
    sel = f"sel(run_id) AS (SELECT id FROM runs{ids})"
    if names is not None:
        arms = [f"SELECT CAST({b} AS VARCHAR(200)) AS name" for b in _binds("n", names, params)]
        # UNION, not UNION ALL: a name listed twice is one series
        nm = " UNION ".join(arms) or "SELECT CAST(NULL AS VARCHAR(200)) AS name WHERE 1 = 0"
        return (f"{sel},\nnm(name) AS ({nm}),\n"
                "series(run_id, name) AS (SELECT sel.run_id, nm.name FROM sel CROSS JOIN nm)")
    return f"""{sel},
skip(run_id, name) AS (
  SELECT sel.run_id, (SELECT MIN(m.name) FROM metrics m WHERE m.run_id = sel.run_id) FROM sel
  UNION ALL
  SELECT q.run_id, (SELECT MIN(m.name) FROM metrics m WHERE m.run_id = q.run_id
                    AND m.name > q.name) FROM skip q WHERE q.name IS NOT NULL),
series(run_id, name) AS (SELECT run_id, name FROM skip WHERE name IS NOT NULL)"""


def _sqlite_body(nb: int) -> str:
    """SQLite: step-range buckets ``b`` of each long series, per bucket the steps to keep
    (``c``), joined back to ``metrics`` for their values (module docstring)."""
    last = f"(SELECT m.step FROM metrics m WHERE {_RANGE} ORDER BY m.step DESC LIMIT 1)"
    nan = f"(SELECT m.step FROM metrics m WHERE {_RANGE} AND m.value IS NULL ORDER BY m.step " \
          "LIMIT 1)"
    # one pass for the min: p = 2 * (its step - lo) + (1 if the bucket holds a NULL), or -1
    # when the bucket holds no number (all NULL, or empty); the first-NULL seek then runs only
    # where p says there is one. (Bare column: m.step is read off the MIN(m.value) row.)
    packed = ("(SELECT CASE WHEN MIN(m.value) IS NULL THEN -1 ELSE "
              "2 * (m.step - b.lo) + (COUNT(*) > COUNT(m.value)) END "
              f"FROM metrics m WHERE {_RANGE})")
    smax = ("(SELECT CASE WHEN MAX(m.value) IS NOT NULL THEN m.step END "  # all NULL: none
            f"FROM metrics m WHERE {_RANGE})")
    return f"""k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < {nb}),
b AS MATERIALIZED (
  SELECT p.run_id, p.name,
    p.s0 + (k.i * p.w + {nb - 1}) / {nb} AS lo,
    p.s0 + ((k.i + 1) * p.w + {nb - 1}) / {nb} - 1 AS hi
  FROM long p CROSS JOIN k),
c0 AS MATERIALIZED (SELECT b.run_id, b.name, b.lo, b.hi, {packed} AS p,
  {smax} AS smax, {last} AS slast FROM b),
c AS MATERIALIZED (SELECT b.run_id, b.name, CASE WHEN b.p >= 0 THEN b.lo + b.p / 2 END AS smin,
  b.smax, b.slast, CASE WHEN b.p % 2 <> 0 THEN {nan} END AS snan FROM c0 b),
picked(run_id, name, step) AS (
  SELECT run_id, name, smin FROM c UNION SELECT run_id, name, smax FROM c
  UNION SELECT run_id, name, snan FROM c
  UNION SELECT c.run_id, c.name, c.slast FROM c JOIN metrics m
    ON m.run_id = c.run_id AND m.name = c.name AND m.step = c.slast WHERE m.value IS NOT NULL)
SELECT m.run_id AS run_id, m.name AS name, m.step AS step, m.value AS value
FROM picked p JOIN metrics m ON m.run_id = p.run_id AND m.name = p.name AND m.step = p.step"""


def _pg_body(nb: int) -> str:
    """PostgreSQL: one hash-aggregate pass over each long series' points, bucket by bucket.
    ``MIN(ARRAY[value, step])`` is the arg-min (arrays compare element by element, so ties go
    to the earliest step), ``MAX(ARRAY[value, -step])`` the arg-max, ``MAX(ARRAY[step, value])``
    the last point: no sort, no second read."""
    return f"""agg AS MATERIALIZED (
  SELECT m.run_id, m.name, (CAST(m.step - p.s0 AS BIGINT) * {nb}) / p.w AS bucket,
    MIN(ARRAY[m.value, m.step]) FILTER (WHERE m.value IS NOT NULL) AS amin,
    MAX(ARRAY[m.value, -m.step]) FILTER (WHERE m.value IS NOT NULL) AS amax,
    MAX(ARRAY[m.step, m.value]) AS alast,
    MIN(m.step) FILTER (WHERE m.value IS NULL) AS snan
  FROM long p JOIN metrics m ON m.run_id = p.run_id AND m.name = p.name
  GROUP BY 1, 2, 3)
SELECT run_id, name, CAST(amin[2] AS INTEGER) AS step, amin[1] AS value FROM agg
  WHERE amin IS NOT NULL
UNION SELECT run_id, name, CAST(-amax[2] AS INTEGER), amax[1] FROM agg WHERE amax IS NOT NULL
UNION SELECT run_id, name, CAST(alast[1] AS INTEGER), alast[2] FROM agg
  WHERE alast[2] IS NOT NULL
UNION SELECT run_id, name, snan, CAST(NULL AS DOUBLE PRECISION) FROM agg
  WHERE snan IS NOT NULL"""


def downsample_sql(run_ids: Sequence[int] | None, names: Sequence[str] | None,
                   max_points: int, dialect: str) -> tuple[str, dict[str, Any]]:
    """The downsampling query over raw points (module docstring); ``dialect``: "sqlite" or
    "postgresql"."""
    params: dict[str, Any] = {}
    maxp, nb = int(max_points), int(max_points) // 4
    body = _sqlite_body(nb) if dialect == "sqlite" else _pg_body(nb)
    sql = f"""WITH RECURSIVE {_series_ctes(run_ids, names, params)},
span AS MATERIALIZED (
  SELECT s.run_id, s.name,
    (SELECT MIN(m.step) FROM metrics m WHERE m.run_id = s.run_id AND m.name = s.name) AS s0,
    (SELECT MAX(m.step) FROM metrics m WHERE m.run_id = s.run_id AND m.name = s.name) AS s1,
    (SELECT m.step FROM metrics m WHERE m.run_id = s.run_id AND m.name = s.name
     ORDER BY m.step LIMIT 1 OFFSET {maxp}) AS over_step
  FROM series s),
long AS (SELECT run_id, name, s0, CAST(s1 - s0 + 1 AS BIGINT) AS w FROM span
         WHERE over_step IS NOT NULL),
{body}
UNION ALL
SELECT m.run_id, m.name, m.step, m.value FROM span s
  JOIN metrics m ON m.run_id = s.run_id AND m.name = s.name
WHERE s.over_step IS NULL
ORDER BY 1, 2, 3"""
    return sql, params


def _coarse_sqlite() -> str:
    """Rollup blocks ``rb`` (with their query bucket ``qb``) -> the kept points: one GROUP BY
    per kind (SQLite's bare-column rule reads the step/value off the MIN/MAX row)."""
    g = "GROUP BY run_id, name, qb"
    return f"""SELECT run_id, name, min_step, MIN(min_value) FROM rb
  WHERE min_value IS NOT NULL {g}
UNION SELECT run_id, name, max_step, MAX(max_value) FROM rb WHERE max_value IS NOT NULL {g}
UNION SELECT run_id, name, ls, lv FROM (SELECT run_id, name, MAX(last_step) AS ls,
  last_value AS lv FROM rb {g}) q WHERE lv IS NOT NULL
UNION SELECT run_id, name, MIN(nan_step), NULL FROM rb WHERE nan_step IS NOT NULL {g}"""


def _coarse_pg() -> str:
    """PostgreSQL: the same from one aggregate pass (arg-min/-max as arrays, as _pg_body)."""
    return """SELECT run_id, name, CAST(amin[2] AS INTEGER), amin[1] FROM cagg
  WHERE amin IS NOT NULL
UNION SELECT run_id, name, CAST(-amax[2] AS INTEGER), amax[1] FROM cagg WHERE amax IS NOT NULL
UNION SELECT run_id, name, CAST(alast[1] AS INTEGER), alast[2] FROM cagg
  WHERE alast[2] IS NOT NULL
UNION SELECT run_id, name, snan, CAST(NULL AS DOUBLE PRECISION) FROM cagg
  WHERE snan IS NOT NULL"""


_PG_CAGG = """cagg AS MATERIALIZED (SELECT run_id, name, qb,
    MIN(ARRAY[min_value, min_step]) FILTER (WHERE min_value IS NOT NULL) AS amin,
    MAX(ARRAY[max_value, -max_step]) FILTER (WHERE max_value IS NOT NULL) AS amax,
    MAX(ARRAY[last_step, last_value]) AS alast, MIN(nan_step) AS snan
  FROM rb GROUP BY run_id, name, qb),"""


def rollup_sql(run_ids: Sequence[int] | None, names: Sequence[str] | None, max_points: int,
               dialect: str, block: int = BLOCK) -> tuple[str, dict[str, Any]]:
    """Downsampling with the rollup table (results_db/write/rollup.py): a series' bounds and point
    count come from its rollup rows; a long series whose buckets span >= ``block`` steps is
    bucketed by whole rollup blocks (a block belongs to the bucket of its first step) and
    read from the rollup alone; other long series take the exact raw-point path; short ones
    come back whole. Same kept points per bucket: min, max, last number, first NULL."""
    params: dict[str, Any] = {}
    maxp, nb = int(max_points), int(max_points) // 4
    where = _filters(run_ids, names, params)
    fine = _sqlite_body(nb) if dialect == "sqlite" else _pg_body(nb)
    coarse = _coarse_sqlite() if dialect == "sqlite" else _coarse_pg()
    sql = f"""WITH span AS MATERIALIZED (
  SELECT run_id, name, MIN(first_step) AS s0, MAX(last_step) AS s1, SUM(n) AS cnt
  FROM {TABLE} {where} GROUP BY run_id, name),
long AS (SELECT run_id, name, s0, CAST(s1 - s0 + 1 AS BIGINT) AS w FROM span
         WHERE cnt > {maxp} AND s1 - s0 + 1 < {block * nb}),
wide AS (SELECT run_id, name, s0, CAST(s1 - s0 + 1 AS BIGINT) AS w FROM span
         WHERE cnt > {maxp} AND s1 - s0 + 1 >= {block * nb}),
rb AS MATERIALIZED (SELECT r.run_id, r.name, r.min_step, r.min_value, r.max_step,
    r.max_value, r.last_step, r.last_value, r.nan_step,
    (CAST(r.first_step - c.s0 AS BIGINT) * {nb}) / c.w AS qb
  FROM wide c CROSS JOIN {TABLE} r WHERE r.run_id = c.run_id AND r.name = c.name),
short AS MATERIALIZED (SELECT run_id, name FROM span WHERE cnt <= {maxp}),
{_PG_CAGG if dialect != "sqlite" else ""}
{fine}
UNION {coarse}
UNION ALL
SELECT m.run_id, m.name, m.step, m.value FROM short s
  CROSS JOIN metrics m WHERE m.run_id = s.run_id AND m.name = s.name
ORDER BY 1, 2, 3"""
    # CROSS JOIN: SQLite keeps the (few) series as the outer loop and seeks metrics by its
    # primary key; a plain JOIN let it scan all of metrics against an empty ``short``.
    return ("WITH RECURSIVE" + sql[4:] if dialect == "sqlite" else sql), params


def metrics_sql(run_ids: Sequence[int] | None, names: Sequence[str] | None,
                max_points: int | None, dialect: str = "sqlite") -> tuple[str, dict[str, Any]]:
    """SQL and bind parameters for ``db.metrics`` (rows: run_id, name, step, value, ordered)."""
    if not max_points:
        params: dict[str, Any] = {}
        where = _filters(None if run_ids is None else list(run_ids),
                         None if names is None else list(names), params)
        return (f"SELECT run_id, name, step, value FROM metrics {where} "
                "ORDER BY run_id, name, step", params)
    if max_points < 4:
        raise ValueError(f"metrics: max_points must be >= 4 (min/max/last/NaN per bucket), "
                         f"got {max_points}")
    return downsample_sql(None if run_ids is None else list(run_ids),
                          None if names is None else list(names), max_points, dialect)


def read_metrics(engine: Any, run_ids: Sequence[int] | None, names: Sequence[str] | None,
                 max_points: int | None) -> pl.DataFrame:
    """``db.metrics`` as a DataFrame (run_id, name, step, value): downsampled reads use the
    rollup when this DB has it (a read-only DB may predate migration 0003_rollup)."""
    if max_points and max_points >= 4:
        with engine.connect() as conn:
            use = has_rollup(conn)
        if use:
            sql, params = rollup_sql(None if run_ids is None else list(run_ids),
                                     None if names is None else list(names), max_points,
                                     engine.dialect.name)
            return frame(engine, sql, params, _points_schema())
    sql, params = metrics_sql(run_ids, names, max_points, engine.dialect.name)
    return frame(engine, sql, params, _points_schema())


def _points_schema() -> dict[str, pl.DataType]:
    return {"run_id": pl.Int64(), "name": pl.String(), "step": pl.Int64(),
            "value": pl.Float64()}
