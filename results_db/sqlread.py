"""SQL rows -> polars DataFrames: the bottom of results_db's read side.

query.py (the ReaderMixin) and frames.py (the analysis reads) build frames with these, and so
must every module query.py imports (downsample.py): importing ``frame`` from query.py there
would close an import cycle. Nothing here imports them back.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
from sqlalchemy import Engine, text


def frame(engine: Engine, stmt: Any, params: dict[str, Any] | None = None,
          schema: Mapping[str, pl.DataType] | None = None) -> pl.DataFrame:
    """Execute ``stmt`` (a Select or SQL text) and return its rows as a DataFrame.

    SQL text has no result types, so its rows are read straight off the DBAPI cursor (no
    per-row Row objects: ~2x faster on 100k rows); a Select keeps SQLAlchemy's type
    processing (aware UTC datetimes, booleans, JSON). One rule for empty results: a column
    with no value to infer a type from (no rows, or only nulls) takes the type the Select
    declares, or ``schema``'s for SQL text, so a frame has its schema with or without rows."""
    raw = isinstance(stmt, str)
    with engine.connect() as conn:
        result = conn.execute(text(stmt) if raw else stmt, params or {})
        cols = list(result.keys())
        rows = result.cursor.fetchall() if raw and result.cursor is not None \
            else result.fetchall()
    return typed(rows_to_frame(cols, rows), declared(stmt) if schema is None else schema)


def declared(stmt: Any) -> dict[str, pl.DataType]:
    """{column: polars type} of what a Select declares (int, float, text, bool, datetime);
    SQL text and JSON columns declare nothing here."""
    kinds: dict[type, pl.DataType] = {int: pl.Int64(), float: pl.Float64(), str: pl.String(),
                                      bool: pl.Boolean(), dt.datetime: pl.Datetime("us", "UTC")}
    out: dict[str, pl.DataType] = {}
    for col in [] if isinstance(stmt, str) else getattr(stmt, "selected_columns", []):
        try:  # a TypeDecorator (UTCDateTime) declares through its impl
            kind = kinds.get(getattr(col.type, "impl_instance", col.type).python_type)
        except NotImplementedError:  # a type with no Python equivalent (NullType, "*")
            continue
        if kind is not None:
            out[col.key] = kind
    return out


def typed(df: pl.DataFrame, schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """``df`` with each column that holds no value (polars' Null type) cast to ``schema``'s."""
    fix = {c: t for c, t in schema.items() if df.schema.get(c) == pl.Null}
    return df.with_columns(pl.col(c).cast(t) for c, t in fix.items()) if fix else df


@dataclass(frozen=True)
class QueryLimits:
    """What one user query may take: ``timeout_s`` of database time (None: no limit), at most
    ``max_rows`` rows and ``max_bytes`` of cell data (text and blobs by length, other values
    8 bytes), and no single value above ``max_bytes``. A query past one stops with
    QueryLimitError; Ctrl-C stops it at once (KeyboardInterrupt)."""

    timeout_s: float | None = 60.0
    max_rows: int = 1_000_000
    max_bytes: int = 256 * 2**20


class QueryLimitError(ValueError):
    """A user query ran past its QueryLimits (the message names the limit and the option)."""


def fetch_capped(cursor: Any, limits: QueryLimits) -> list[Any]:
    """Every row of ``cursor``, in chunks, counting rows and bytes as they arrive: a 13M-row
    join stops at the cap instead of exhausting memory."""
    rows: list[Any] = []
    size = 0
    while chunk := cursor.fetchmany(10_000):
        rows.extend(chunk)
        size += sum(len(v) if isinstance(v, (str, bytes, bytearray, memoryview)) else 8
                    for r in chunk for v in r)
        if len(rows) > limits.max_rows:
            raise QueryLimitError(f"query: the result has more than {limits.max_rows:,} rows "
                                  "(--max-rows); add a LIMIT, a WHERE or an aggregate")
        if size > limits.max_bytes:
            raise QueryLimitError(f"query: the result holds more than "
                                  f"{round(limits.max_bytes / 2**20, 3):g} MiB (--max-mb); select "
                                  "fewer rows or columns")
    return rows


class _SqliteGuard:
    """For one user statement on a SQLite connection: a progress handler that stops it past
    the deadline or on Ctrl-C (SQLite's VM otherwise never returns to Python, so SIGINT is
    never seen), and SQLite's own length limit at ``max_bytes`` (``zeroblob(1e9)`` fails in
    SQLite instead of aborting the process in an allocation)."""

    def __init__(self, raw: Any, limits: QueryLimits) -> None:
        self.raw, self.limits = raw, limits
        self.timed_out = False
        self.deadline = None if limits.timeout_s is None else \
            time.monotonic() + limits.timeout_s

    def _tick(self) -> int:
        # Being called at all lets Python run a pending SIGINT handler; its KeyboardInterrupt
        # makes sqlite3 stop the statement ("interrupted", see check).
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.timed_out = True
            return 1
        return 0

    def __enter__(self) -> _SqliteGuard:
        self.raw.set_progress_handler(self._tick, 20_000)
        self.old_length = self.raw.setlimit(sqlite3.SQLITE_LIMIT_LENGTH,
                                            min(self.limits.max_bytes, 2**31 - 1))
        return self

    def __exit__(self, *exc: object) -> None:
        self.raw.set_progress_handler(None, 0)
        self.raw.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, self.old_length)

    def check(self, exc: BaseException) -> None:
        """After the statement failed: say why when a limit stopped it. SQLite reports every
        stop by the progress handler as "interrupted"; one that was not the deadline was
        Ctrl-C (the KeyboardInterrupt raised inside the callback is swallowed by sqlite3, so
        it is raised again here)."""
        msg = str(getattr(exc, "orig", exc))
        if self.timed_out:
            raise QueryLimitError(f"query: stopped after {self.limits.timeout_s:g} s "
                                  "(--timeout); narrow the query or raise --timeout")
        if "interrupted" in msg:
            raise KeyboardInterrupt
        if "string or blob too big" in msg:
            raise QueryLimitError(f"query: the result holds a value larger than "
                                  f"{round(self.limits.max_bytes / 2**20, 3):g} MiB (--max-mb)")


def user_frame(engine: Engine, sql: str, limits: QueryLimits | None = None) -> pl.DataFrame:
    """A user's SQL text run as written: no ``:name`` bind parsing, so ``':x'`` inside a
    string literal stays text (``frame`` would read it as a parameter with no value); within
    ``limits`` (SQLite: progress handler and length limit; rows and bytes while fetching)."""
    limits = limits or QueryLimits()
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        guard = _SqliteGuard(raw, limits)
        try:
            with guard:
                result = conn.exec_driver_sql(sql)
                cols = list(result.keys())
                rows = fetch_capped(result.cursor, limits) if result.cursor is not None \
                    else result.fetchall()
        except Exception as exc:
            guard.check(exc)
            raise
    return rows_to_frame(cols, rows)


def rows_to_frame(cols: list[str], rows: Sequence[Any]) -> pl.DataFrame:
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
