"""Multi-row statements for the write path: one statement per batch, not one per row.

An ``executemany`` costs a statement per row on the server (psycopg pipelines them, each
still parsed, planned and executed), and SQLAlchemy's ORM-enabled multi-VALUES insert
spends more in Python than the write itself (a cache key per bound value). A trial's flush
writes ~10-30 rows per table, so the hot tables (metrics on PostgreSQL, summaries, the
rollup) are written with plain SQL of one batch (docs/benchmarks.md "Per-run overhead,
round 4"):

- PostgreSQL: one array per column, ``SELECT * FROM unnest(%s::int8[], ...)``. The text is
  the same for every batch size, so psycopg converts it once (its query cache skips texts of
  more than 50 parameters, and a 2-step trial's 18 metric points were 90: re-parsed on every
  flush) and prepares it on the server after a few uses (docs/benchmarks.md "Per-run
  overhead, round 6").
- SQLite: ``VALUES (?, ...), (?, ...)``, in chunks under the parameter limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# parameters per statement: the oldest SQLite builds' limit
SQLITE_MAX_PARAMS = 999


def execute_rows(conn: Any, sql: str, rows: Sequence[Sequence[Any]],
                 pg_types: Sequence[str]) -> None:
    """Run ``sql`` -- text with one ``{values}`` slot for the row source -- over ``rows``
    (equal lengths, one value per entry of ``pg_types``: each column's PostgreSQL type, for
    its array). PostgreSQL: one statement; SQLite: as few as the parameter limit allows."""
    if not rows:
        return
    width = len(rows[0])
    if len(pg_types) != width:
        raise ValueError(f"execute_rows: {width} values per row, {len(pg_types)} column types")
    if conn.dialect.name == "postgresql":
        source = "SELECT * FROM unnest(" + ", ".join(f"%s::{t}[]" for t in pg_types) + ")"
        cols = [list(c) if t != "float8" else [None if v is None else float(v) for v in c]
                for c, t in zip(zip(*rows), pg_types)]  # psycopg refuses a list of int + float
        conn.exec_driver_sql(sql.format(values=source), tuple(cols))
        return
    one = f"({', '.join(['?'] * width)})"
    per = max(1, SQLITE_MAX_PARAMS // width)
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        conn.exec_driver_sql(sql.format(values="VALUES " + ", ".join([one] * len(chunk))),
                             tuple(x for r in chunk for x in r))
