"""SQL rows -> polars DataFrames: the bottom of results_db's read side.

query.py (the ReaderMixin) and frames.py (the analysis reads) build frames with these, and so
must every module query.py imports (downsample.py): importing ``frame`` from query.py there
would close an import cycle. Nothing here imports them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text

if TYPE_CHECKING:
    import polars as pl


def frame(engine: Engine, stmt: Any, params: dict[str, Any] | None = None) -> pl.DataFrame:
    """Execute ``stmt`` (a Select or SQL text) and return its rows as a DataFrame.

    SQL text has no result types, so its rows are read straight off the DBAPI cursor (no
    per-row Row objects: ~2x faster on 100k rows); a Select keeps SQLAlchemy's type
    processing (aware UTC datetimes, booleans, JSON)."""
    raw = isinstance(stmt, str)
    with engine.connect() as conn:
        result = conn.execute(text(stmt) if raw else stmt, params or {})
        cols = list(result.keys())
        rows = result.cursor.fetchall() if raw and result.cursor is not None \
            else result.fetchall()
    return rows_to_frame(cols, rows)


def user_frame(engine: Engine, sql: str) -> pl.DataFrame:
    """A user's SQL text run as written: no ``:name`` bind parsing, so ``':x'`` inside a
    string literal stays text (``frame`` would read it as a parameter with no value)."""
    with engine.connect() as conn:
        result = conn.exec_driver_sql(sql)
        cols = list(result.keys())
        rows = result.cursor.fetchall() if result.cursor is not None else result.fetchall()
    return rows_to_frame(cols, rows)


def rows_to_frame(cols: list[str], rows: Sequence[Any]) -> pl.DataFrame:
    import polars as pl

    if not rows:
        return pl.DataFrame({c: [] for c in cols})
    if len(set(cols)) == len(cols):  # column-wise build: faster than orient="row"
        return pl.DataFrame(dict(zip(cols, map(list, zip(*rows)), strict=True)), strict=False)
    return pl.DataFrame([tuple(r) for r in rows], schema=cols, orient="row",
                        infer_schema_length=None)


def in_list(prefix: str, values: Sequence[Any], params: dict[str, Any]) -> str:
    """Bound parameters for an IN list: ``:prefix0, :prefix1, ...`` (values go to params)."""
    names = []
    for i, v in enumerate(values):
        params[f"{prefix}{i}"] = v
        names.append(f":{prefix}{i}")
    return ", ".join(names) or "NULL"
