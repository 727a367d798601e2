"""Multi-row statements for the write path: one statement per batch, not one per row.

An ``executemany`` costs a statement per row on the server (psycopg pipelines them, each
still parsed, planned and executed), and SQLAlchemy's ORM-enabled multi-VALUES insert
spends more in Python than the write itself (a cache key per bound value). A trial's flush
writes ~10-30 rows per table, so the hot tables (metrics on PostgreSQL, summaries, the
rollup) are written with plain SQL text of ``n`` row tuples (docs/benchmarks.md
"Per-run overhead, round 4").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# parameters per statement: the oldest SQLite builds' limit; PostgreSQL's protocol allows
# 65535, and batches of ~5,000 keep one statement's text and plan small
MAX_PARAMS = {"sqlite": 999, "postgresql": 5000}


def execute_rows(conn: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run ``sql`` -- text with one ``{values}`` slot for the row tuples -- over ``rows``
    (equal lengths), in as few statements as the parameter limit allows."""
    if not rows:
        return
    width = len(rows[0])
    ph = "?" if conn.dialect.name == "sqlite" else "%s"
    one = f"({', '.join([ph] * width)})"
    per = max(1, MAX_PARAMS.get(conn.dialect.name, 999) // width)
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        conn.exec_driver_sql(sql.format(values=", ".join([one] * len(chunk))),
                             tuple(x for r in chunk for x in r))
