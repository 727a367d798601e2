"""Engines for one results DB URL: a writer and a read-only reader.

SQLite (the default): WAL (readers never block the writer), ``busy_timeout`` 30 s, foreign keys
on, and every writer transaction starts with ``BEGIN IMMEDIATE``: a deferred transaction that
reads and then writes cannot wait for the lock (SQLite returns "database is locked" at once
to avoid deadlock), an immediate one takes the write lock up front and waits politely.
The reader opens ``file:...?mode=ro`` with ``query_only`` and an authorizer that refuses
anything but reading, so ``db.query`` cannot write even through ``ATTACH`` or a ``PRAGMA``.

PostgreSQL: the reader's sessions have ``default_transaction_read_only=on``.

``readonly_engine`` is what ``results_db.open(readonly=True)`` uses for everything: the SQLite
file must exist (``DBNotFound`` otherwise: a mistyped path is an error, not a new empty DB), and
nothing on that connection switches the journal mode, migrates or writes, so the file's bytes
never change (tests hash it before and after every read command).
"""

from __future__ import annotations

import math
import os
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError

from contract import env
from results_db.dberrors import (
    DBForeign,
    DBNewer,
    DBNotFound,
    DBOutdated,
    DBUnavailable,
    DBUnreadable,
    sqlite_busy,
    translate,
)
from results_db.schema.migrate import HEAD_REVISION, older_revisions
from results_db.schema.ownership import found_on, found_sqlite, judge

DEFAULT_URL = "sqlite:///results.db"
DB_ENV = "GATESWEEP_DB"  # THE results DB when no --db/url is given (default_url owns the rule)


def default_url() -> str:
    """$GATESWEEP_DB, else sqlite:///results.db (an empty variable counts as unset): the one
    rule every entry point (CLI, dashboard, screenshot, results_db.open) applies."""
    url = env.text(DB_ENV) or DEFAULT_URL
    try:  # a value that cannot be a DB URL names the variable it came from
        parse_url(url)
    except ValueError as exc:
        raise ValueError(f"environment variable {DB_ENV}: {exc}") from None
    return url
APP_NAME = "gatesweep"  # PostgreSQL application_name prefix (results_db.read.pgstat counts by it)


BUSY_TIMEOUT_MS = 30_000
# libpq waits for the OS's TCP timeout (minutes) on a host that does not answer; a results DB
# that cannot be reached in this long is reported at once (a URL's own connect_timeout wins).
PG_CONNECT_TIMEOUT_S = 5
# Connections per engine on PostgreSQL (docs/cluster.md "Connections"). SQLAlchemy's default
# (5 kept + 10 overflow per engine) let one trial hold up to 30 (writer + reader); at 100+
# trials that exhausts a server's max_connections (100 by default). A process uses at most two
# connections of an engine at once (a trial: its training loop and its heartbeat thread; a
# driver: its lease keeper and progress threads), so each engine keeps two and never opens
# more: a third concurrent user waits for one (PG_POOL_TIMEOUT_S) instead of connecting.
# Bound: connections <= 4 per process holding a ResultsDB (2 for a read-only one).
PG_POOL_SIZE = 2
PG_POOL_TIMEOUT_S = 60
# A pooled connection idle this long is pinged before use (engine._ping_when_idle).
PG_PING_IDLE_S = 1.0
# A writer session that sits inside a transaction this long without sending a statement is
# ended by the server, which frees its row locks. Our transactions send their statements
# back to back (milliseconds); a session idle in one belongs to a frozen process (SIGSTOP,
# swap storm) that holds the lock every heartbeat takes on its run row -- the driver's lease
# renewal then waited on it for good and never recorded the frozen trial dead (the fault
# matrix's stall case, PostgreSQL, under load). Below the default staleness window (17 s).
PG_IDLE_IN_TX_TIMEOUT_S = 10
__all__ = ["DBForeign", "DBNewer", "DBNotFound", "DBOutdated", "DBUnavailable",
           "DBUnreadable"]


def _pg_connect_args(url: URL, **extra: Any) -> dict[str, Any]:
    """libpq options: a connect timeout, and an application_name naming this process
    (``gatesweep pid=123``: pg_stat_activity then says which trial/driver holds what). The
    URL's own connect_timeout / application_name win."""
    args: dict[str, Any] = {"connect_timeout": PG_CONNECT_TIMEOUT_S,
                            "application_name": f"{APP_NAME} pid={os.getpid()}"}
    return {**{k: v for k, v in args.items() if k not in url.query}, **extra}


def _pg_engine(url: URL, **connect_args: Any) -> Engine:
    """A bounded pool (PG_POOL_SIZE, no overflow) whose connections are checked before use
    once they sat idle (a restarted server's dead connections are replaced, not handed out)."""
    engine = create_engine(url, pool_size=PG_POOL_SIZE, max_overflow=0,
                           pool_timeout=PG_POOL_TIMEOUT_S,
                           connect_args=_pg_connect_args(url, **connect_args))
    _ping_when_idle(engine, PG_PING_IDLE_S)
    return engine


def _ping_when_idle(engine: Engine, idle_s: float) -> None:
    """SQLAlchemy's pre-ping, only for a connection back in the pool for ``idle_s`` or more.
    A ping before every checkout was a sixth of a short trial's statements (3 of 18); one
    used a moment ago is alive unless the server restarted in that moment, and a failure
    then is a DB error like any other (waited for and retried:
    orchestrator/run/health/dbretry.py)."""
    from sqlalchemy.exc import DisconnectionError

    @event.listens_for(engine, "checkin")
    def _checkin(dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is not None and time.monotonic() - since < idle_s:
            return
        try:
            with dbapi_conn.cursor() as cur:
                cur.execute("SELECT 1")
            if not dbapi_conn.autocommit:
                dbapi_conn.rollback()  # the ping's implicit transaction ends here
        except Exception as exc:  # noqa: BLE001 - any failure: the pool opens a new one
            raise DisconnectionError(f"connection failed its ping: {exc}") from exc


def parse_url(url: str | URL) -> URL:
    """A DB URL, or a plain file path (``results.db``, ``~/runs/r.db``: the SQLite file there,
    which is what a user typing ``--db results.db`` means). Anything else that SQLAlchemy
    cannot parse is a ValueError naming the value (its password hidden) and the forms expected."""
    if isinstance(url, URL):
        return url
    if "://" not in url and url not in ("", ":memory:"):
        return URL.create("sqlite", database=str(Path(url).expanduser()))
    shown = url.split("://", 1)[0] + "://..." if "@" in url else url
    try:
        u = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: e.g. a non-numeric port
        raise ValueError(f"db url: {shown!r} is not a database URL; expected "
                         "sqlite:///PATH, postgresql://USER@HOST/DB or a file path") from None
    if any("\x00" in str(part or "") for part in (u.database, u.host, u.username)):
        # '%00' decodes to NUL: no file or host has one (the OS said "embedded null byte")
        raise ValueError(f"db url: {shown!r} holds a NUL byte (%00); expected "
                         "sqlite:///PATH, postgresql://USER@HOST/DB or a file path")
    return u


def resolve_url(url: str | URL | None) -> URL:
    """None -> $GATESWEEP_DB or sqlite:///results.db; plain postgresql:// -> psycopg 3."""
    raw = url if url is not None else default_url()
    u = parse_url(raw)
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


def sqlite_database(url: str | URL) -> str | None:
    """The database path of a SQLite URL ('' or ':memory:' possible); None for other backends.
    (The orchestrator asks this instead of parsing URLs itself: no SQLAlchemy outside here.)"""
    u = parse_url(url)
    return (u.database or "") if u.get_backend_name() == "sqlite" else None


def backup_sqlite(url: str | URL, dest: str | Path) -> Path:
    """Copy the SQLite DB at ``url`` into the single self-contained file ``dest`` (no -wal/-shm
    beside it) through SQLite's online backup API, consistent even while writers run."""
    src_path = sqlite_database(url)
    if src_path is None:
        raise ValueError(f"backup_sqlite: {redacted(url)} is not an SQLite file URL")
    dest = Path(dest)
    dest.unlink(missing_ok=True)
    with sqlite3.connect(src_path) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)
    return dest


def absolute_url(url: str) -> str:
    """sqlite:///results.db -> sqlite:////abs/cwd/results.db; other URLs unchanged.

    Trials run in other processes and Tune may change their working directory to the trial
    dir, so a relative SQLite path would silently open a different (empty) database there.
    """
    u = parse_url(url)
    db = u.database
    if u.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:") \
            or os.path.isabs(db):
        return u.render_as_string(hide_password=False)
    return u.set(database=os.path.abspath(db)).render_as_string(hide_password=False)


def redacted(url: str | URL) -> str:
    """The URL with its password hidden (for messages and Ray job metadata)."""
    return parse_url(url).render_as_string(hide_password=True)


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def _translating(eng: Engine, url: URL, reads_only: bool = False) -> Engine:
    """``eng`` raising DBUnavailable (naming the DB) for driver errors that mean it is unusable."""
    event.listen(eng, "handle_error", lambda ctx: translate(_show(url), ctx, reads_only))
    return eng


def _pg_options(url: URL, *settings: str) -> str:
    """libpq ``options``: the URL's own (e.g. -csearch_path=...) plus ``-c`` settings."""
    own = url.query.get("options", "")
    own = " ".join(own) if isinstance(own, tuple) else own  # given twice in the URL
    return " ".join([own, *(f"-c {s}" for s in settings)]).strip()


def writer_engine(url: URL) -> Engine:
    """The read-write engine; a DB that cannot be opened or written raises DBUnavailable
    (results_db/dberrors.py) naming it, from any statement."""
    if not is_sqlite(url):
        idle_ms = int(PG_IDLE_IN_TX_TIMEOUT_S * 1000)
        opts = _pg_options(url, f"idle_in_transaction_session_timeout={idle_ms}")
        return _translating(_pg_engine(url, options=opts), url)
    path = Path(url.database or "")
    if path.is_dir():
        raise DBUnavailable(f"results DB {url.database} could not be opened: it is a "
                            "directory; expected a SQLite file path")
    if not path.parent.is_dir():  # a mistyped path makes no folders (a DB file, at most)
        what = "is not a directory" if path.parent.exists() else "does not exist"
        raise DBUnavailable(f"results DB {url.database} could not be opened: its directory "
                            f"{path.parent} {what} (gatesweep creates the DB file, never "
                            "folders: create it first, or check --db)")
    _check_sqlite_writable(path)  # another tool's or a newer gatesweep's: never touched
    eng = _translating(create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                                        "check_same_thread": False}), url)

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _rec: Any) -> None:
        dbapi_conn.isolation_level = None  # driver hands-off: we emit BEGIN ourselves
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        _enter_wal(dbapi_conn)
        for pragma in ("foreign_keys=ON", "synchronous=NORMAL"):
            dbapi_conn.execute(f"PRAGMA {pragma}")
        _ensure_sqrt(dbapi_conn)

    @event.listens_for(eng, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return eng


def _enter_wal(dbapi_conn: sqlite3.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, retried while another process holds the file.

    Switching a fresh (rollback-journal) file to WAL needs its exclusive lock. When several
    processes open one fresh file at once, SQLite answers "database is locked" at once, without
    calling the busy handler (two holders of its shared lock would deadlock waiting): 6 of 100
    rounds of 4 processes failed that way here. Waiting on our side, up to the busy timeout,
    lets the first switch win; the others then find the file in WAL mode already.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not sqlite_busy(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


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


def _check_sqlite_writable(path: Path) -> None:
    """results_db/schema/ownership.py's rule for a writer, read before the writer's first connection
    switches the file to WAL."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        found = found_sqlite(sqlite_read_uri(path))
    except sqlite3.Error:
        return  # not a database at all: the writer's own error names it
    judge(found, f"results DB {path}", write=True, hint=_hint(True))


def check_writable(eng: Engine, url: URL) -> None:
    """PostgreSQL: ownership's rule in the writer's first connection, before Alembic (SQLite
    was checked by writer_engine before connecting)."""
    if not is_sqlite(url):
        with eng.connect() as conn:
            judge(found_on(conn), f"results DB {_show(url)}", write=True, hint=_hint(False))


def _hint(sqlite: bool) -> str:
    return ("choose a new file for --db" if sqlite else "give --db a database or schema of its "
            "own (e.g. a URL ending ?options=-csearch_path%3Dgatesweep)")


def sqlite_read_uri(db: Path) -> str:
    """The URI a reader opens ``db`` with (never created: ``mode=ro``/``rw``). ``rw`` while no
    ``-wal`` file exists: SQLite creates -wal/-shm for a WAL file even for a ``mode=ro``
    reader and only a read-write connection removes them when it closes, so reads left them
    beside a closed DB; nothing is written on it (query_only and the read-only authorizer;
    SQLite opens a write-protected file read-only). ``ro`` when a -wal exists (a writer is
    at work, or crashed: left as found); ``immutable`` on read-only storage."""
    path = quote(str(db))  # a URI: '?', '#' and '%' in the path must be escaped
    if _on_readonly_storage(db):
        mode = "ro&immutable=1"
    else:
        mode = "ro" if Path(f"{db}-wal").exists() else "rw"
    return f"file:{path}?mode={mode}"


def reader_engine(url: URL) -> Engine:
    if not is_sqlite(url):
        opts = _pg_options(url, "default_transaction_read_only=on")
        # a stopped server is DBUnavailable for readers too (it was a raw
        # OperationalError that killed the driver mid-sweep)
        return _translating(_pg_engine(url, options=opts), url, reads_only=True)
    ro = URL.create("sqlite", database=sqlite_read_uri(Path(url.database or "")),
                    query={"uri": "true"})
    eng = create_engine(ro, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000,
                                          "check_same_thread": False})

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _rec: Any) -> None:
        dbapi_conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        dbapi_conn.execute("PRAGMA query_only=ON")
        _ensure_sqrt(dbapi_conn)
        dbapi_conn.set_authorizer(_read_only_authorizer)

    return eng


def _on_readonly_storage(db: Path) -> bool:
    """True when the DB lies where its ``-shm`` file can neither be found nor created (a
    read-only mount): a WAL database -- every results DB -- then opens only as ``immutable``
    (nothing can change it there anyway). Unmerged commits in a ``-wal`` file would be
    invisible that way, so such a DB is refused by name instead of read stale."""
    shm, wal = Path(f"{db}-shm"), Path(f"{db}-wal")
    if shm.exists() or not db.parent.is_dir() or os.access(db.parent, os.W_OK):
        return False
    if wal.exists() and wal.stat().st_size > 0:
        raise DBUnreadable(f"results DB {db} lies on read-only storage with unmerged writes "
                           f"in {wal.name} and no {shm.name}; copy it to writable storage (or "
                           "open it once where it can be written) to read it")
    return True


def readonly_engine(url: URL) -> tuple[Engine, str | None]:
    """The reader engine of an *existing* results DB at this gatesweep's schema, and a warning
    for a newer gatesweep's DB (None otherwise); DBNotFound with the path for a missing one,
    DBForeign for another tool's (ownership.py), DBOutdated for an older schema."""
    if is_sqlite(url):
        path = Path(url.database or "")
        if not path.is_file():
            what = "is not a file" if path.exists() else "does not exist"
            kind = DBUnreadable if path.exists() else DBNotFound
            raise kind(f"results DB {path} {what}; check --db (or $GATESWEEP_DB). "
                             "Read-only commands never create one: `orchestrator submit` or "
                             "`orchestrator db upgrade` does")
    eng = reader_engine(url)
    try:
        with eng.connect() as conn:
            found = found_on(conn)
    except Exception as exc:  # noqa: BLE001 -- not a database at all, or unreachable
        eng.dispose()
        # An unreachable server arrives already translated (DBUnavailable, raised from the
        # driver's error): say why once, in the driver's words, not wrapped twice.
        why = exc.__cause__ if isinstance(exc, DBUnavailable) and exc.__cause__ else \
            getattr(exc, "orig", exc)
        raise DBUnreadable(f"results DB {_show(url)} cannot be read: "
                           f"{(str(why).strip() or type(why).__name__).splitlines()[0]}") from None
    try:
        if not found.tables:
            raise DBUnreadable(f"{_show(url)} is not a gatesweep results DB (no "
                               "alembic_version table)")
        note = judge(found, f"results DB {_show(url)}", write=False,
                     hint=_hint(is_sqlite(url)))
        rev = found.revision
        if HEAD_REVISION and rev != HEAD_REVISION and rev in older_revisions(HEAD_REVISION):
            raise DBOutdated(f"results DB {_show(url)} is at schema revision {rev}, older than "
                             f"this gatesweep's {HEAD_REVISION}; run `orchestrator db upgrade "
                             f"--db {_show(url)}` first (read-only commands never migrate)")
    except (DBUnreadable, DBOutdated):
        eng.dispose()
        raise
    return eng, note


def _show(url: URL) -> str:
    return str(url.database) if is_sqlite(url) else url.render_as_string(hide_password=True)
