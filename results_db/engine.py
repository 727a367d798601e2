"""Engines for one results DB URL: a writer and a read-only reader.

SQLite (the default): WAL (readers never block the writer), ``busy_timeout`` 30 s, foreign keys
on, and every writer transaction starts with ``BEGIN IMMEDIATE``: a deferred transaction that
reads and then writes cannot wait for the lock (SQLite returns "database is locked" at once
to avoid deadlock), an immediate one takes the write lock up front and waits politely.
The reader opens ``file:...?mode=ro`` with ``query_only`` and an authorizer that refuses
anything but reading, so ``db.query`` cannot write even through ``ATTACH`` or a ``PRAGMA``.

PostgreSQL: the reader's sessions have ``default_transaction_read_only=on``.
"""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import URL, Engine, create_engine, event, make_url

DEFAULT_URL = "sqlite:///results.db"
BUSY_TIMEOUT_MS = 30_000


def resolve_url(url: str | URL | None) -> URL:
    """None -> $GATESWEEP_DB or sqlite:///results.db; plain postgresql:// -> psycopg 3."""
    raw = url if url is not None else os.environ.get("GATESWEEP_DB") or DEFAULT_URL
    u = make_url(raw)
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    if u.get_backend_name() == "sqlite":
        if not u.database or u.database == ":memory:" or u.database.startswith("file:"):
            raise ValueError(f"db url: {u!s} -- use a SQLite file URL such as "
                             "sqlite:///results.db (in-memory databases cannot be shared "
                             "between the orchestrator, trials and dashboard)")
        u = u.set(database=str(Path(u.database).expanduser().resolve()))
    elif u.get_backend_name() != "postgresql":
        raise ValueError(f"db url: unsupported backend {u.get_backend_name()!r} in {u!s}; "
                         "expected sqlite:///PATH or postgresql+psycopg://USER@HOST/DB")
    return u


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def writer_engine(url: URL) -> Engine:
    if not is_sqlite(url):
        return create_engine(url, pool_pre_ping=True)
    Path(url.database or "").parent.mkdir(parents=True, exist_ok=True)
    eng = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                           "check_same_thread": False})

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _rec: Any) -> None:
        dbapi_conn.isolation_level = None  # driver hands-off: we emit BEGIN ourselves
        for pragma in (f"busy_timeout={BUSY_TIMEOUT_MS}", "journal_mode=WAL",
                       "foreign_keys=ON", "synchronous=NORMAL"):
            dbapi_conn.execute(f"PRAGMA {pragma}")
        _ensure_sqrt(dbapi_conn)

    @event.listens_for(eng, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return eng


def _ensure_sqrt(dbapi_conn: sqlite3.Connection) -> None:
    """The leaderboard view needs sqrt(); SQLite builds without math functions lack it."""
    try:
        dbapi_conn.execute("SELECT sqrt(4.0)")
    except sqlite3.OperationalError:
        dbapi_conn.create_function("sqrt", 1, math.sqrt, deterministic=True)


_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                 sqlite3.SQLITE_TRANSACTION, getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _read_only_authorizer(action: int, arg1: str | None, arg2: str | None,
                          _db: str | None, _trigger: str | None) -> int:
    if action in _READ_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and arg2 is None:  # reading a pragma, not setting it
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def reader_engine(url: URL) -> Engine:
    if not is_sqlite(url):
        # keep the URL's own libpq options (e.g. -csearch_path=...) and add read-only
        opts = f"{url.query.get('options', '')} -c default_transaction_read_only=on".strip()
        return create_engine(url, pool_pre_ping=True, connect_args={"options": opts})
    path = quote(url.database or "")  # a URI: '?', '#' and '%' in the path must be escaped
    ro = URL.create("sqlite", database=f"file:{path}?mode=ro", query={"uri": "true"})
    eng = create_engine(ro, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                          "check_same_thread": False})

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _rec: Any) -> None:
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        dbapi_conn.execute("PRAGMA query_only=ON")
        _ensure_sqrt(dbapi_conn)
        dbapi_conn.set_authorizer(_read_only_authorizer)

    return eng
