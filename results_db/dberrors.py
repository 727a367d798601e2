"""When the results DB cannot be opened or written: one error that names the DB.

A writer engine (engine.writer_engine) turns the driver errors that mean "this DB is not
usable here" -- disk full, read-only file or file system, I/O error, not a database, cannot
be opened, server unreachable or out of space -- into ``DBUnavailable("results DB PATH could
not be written: database or disk is full")``. Every caller (CLI, trial, reporter) then shows
one sentence naming the DB instead of a SQLAlchemy traceback. So does SQLite's "database is
locked" after the busy timeout (30 s): every writer transaction begins IMMEDIATE, so it only
means another process held the write lock that long (a ``sqlite3`` shell left inside a
transaction, a frozen process), an outage the critical writes wait out
(orchestrator/run/health/dbretry.py) rather than a code error that fails the run for good. Other
errors (a constraint, a bug in our SQL) keep their types. SQLite rolls the failed transaction back
as a whole, so a failed batch leaves none of its rows behind.

Faults are injected from outside in the tests (tests/support/dbfaults.py: an event listener
on the Engine class that clamps SQLite's page count), never by a hook on this write path.
"""

from __future__ import annotations

from typing import Any

# SQLite result codes (extended ones start with these names) that mean the DB is not usable.
_SQLITE_WRITE = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_IOERR")
_SQLITE_OPEN = ("SQLITE_CANTOPEN", "SQLITE_NOTADB", "SQLITE_CORRUPT", "SQLITE_PERM")
# The busy timeout ran out (SQLITE_BUSY and its extended codes): another process holds the lock.
_SQLITE_BUSY = ("SQLITE_BUSY",)
# PostgreSQL SQLSTATE classes: 53 insufficient resources (disk full), 58 system error,
# 08 connection exception, 57P operator intervention (shutdown); 25006 read-only transaction
# (a standby).
_PG_WRITE = ("53", "58", "25006")
_PG_OPEN = ("08", "57P")
# 25P03: the server ended a session left idle inside a transaction (engine.py's writer
# timeout: a frozen process). Its connection is gone; a retry gets a new one.
_PG_SESSION_ENDED = ("25P03",)


class DBUnavailable(OSError):
    """The results DB cannot be opened or written; the message names it and says why."""


class DBConnectionsExhausted(DBUnavailable):
    """The PostgreSQL server refused a new connection because its connection slots are used up
    (``max_connections``, or a role's / database's CONNECTION LIMIT): transient, unlike a
    full disk; docs/cluster.md "Connections" sizes the server for a sweep."""


class DBNotFound(FileNotFoundError):
    """A read-only open found no results DB (no file, not SQLite, or no gatesweep schema)."""


class DBUnreadable(DBNotFound):
    """Something is there, but not a results DB this code can read (a directory, another file,
    another tool's database, an unreachable server): unlike a missing file, worth a note even
    where a missing DB is normal (``validate``, ``submit --dry-run``)."""


class DBForeign(DBUnreadable):
    """A database gatesweep did not make: another tool's tables or migration history
    (results_db/schema/ownership.py). Nothing reads it as results, nothing writes to it."""


class DBNewer(DBForeign):
    """A results DB a newer gatesweep migrated (a schema revision this code does not know):
    read with a warning, never written or migrated here."""


class DBOutdated(ValueError):
    """A read-only open found a DB whose schema is older than this code (no migration runs)."""


# What PostgreSQL says when its slots are used up (SQLSTATE 53300; psycopg reports a refused
# connection without the SQLSTATE, so the text is what we have).
_PG_NO_SLOTS = ("too many clients", "too many connections", "remaining connection slots")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sqlite_busy(orig: BaseException) -> bool:
    """SQLITE_BUSY (or an extended code of it): another connection holds the lock asked for."""
    return (getattr(orig, "sqlite_errorname", None) or "").startswith(_SQLITE_BUSY)


def classify(orig: BaseException, connecting: bool) -> str | None:
    """'written' / 'opened' / 'used' when ``orig`` (a DB-API error) means the DB is unusable,
    else None."""
    name = getattr(orig, "sqlite_errorname", None)
    if name is not None:
        if name.startswith(_SQLITE_WRITE + _SQLITE_BUSY):
            return "written"
        if name.startswith(_SQLITE_OPEN):
            return "opened"
        return None
    state = getattr(orig, "sqlstate", None)
    if state is not None:
        return "written" if state.startswith(_PG_WRITE) else \
            "opened" if state.startswith(_PG_OPEN) else \
            "used" if state.startswith(_PG_SESSION_ENDED) else None
    # psycopg raises OperationalError without a SQLSTATE when the server cannot be reached
    if any(k.__name__ == "OperationalError" for k in type(orig).__mro__):  # + ConnectionTimeout
        return "opened" if connecting else "used"
    return None


def translate(where: str, ctx: Any, reads_only: bool = False) -> None:
    """SQLAlchemy ``handle_error`` hook: raise DBUnavailable for an unusable DB. On a
    read-only engine (``reads_only``) only an unreachable server counts: a refused write
    there is the user's SQL, reported by results_db.read.query in its own words."""
    orig = ctx.original_exception
    if any(k in str(orig).lower() for k in _PG_NO_SLOTS) or \
            getattr(orig, "sqlstate", None) == "53300":
        raise DBConnectionsExhausted(
            f"results DB {where} has no free connection: {_first_line(orig)} (each trial "
            "holds up to 4; raise the server's max_connections or lower max_concurrent, "
            "docs/cluster.md \"Connections\")") from orig
    verb = classify(orig, connecting=ctx.statement is None)
    if verb is not None and not (reads_only and verb == "written"):
        raise DBUnavailable(f"results DB {where} could not be {verb}: "
                            f"{_first_line(orig)}") from orig
