"""Is this database gatesweep's? THE rule, the same on SQLite and PostgreSQL.

A results DB is ours when its ``alembic_version`` names a revision of migrations/versions.
Anything else with tables is not, and nothing may write to it or read it as results:

- tables but no ``alembic_version``: another tool's database (or a foreign ``sweeps`` table
  where ours would go: Alembic then failed with DuplicateTable half-way);
- an ``alembic_version`` whose revision we do not know, without our tables: another tool's
  migration history (Alembic failed with "Can't locate revision");
- an unknown revision *with* our tables: a newer gatesweep migrated it. Read commands read
  it with a warning (``note``); writers refuse (its newer columns would not be kept). When its
  layout lacks a table or column this code reads (a newer gatesweep dropped or renamed it),
  reads refuse too, naming what is missing: reading "anyway" raised "no such table" from the
  first query that touched it.

The check reads only (SQLite: a ``query_only`` connection opened before any writer connects,
so a foreign file is never switched to WAL; PostgreSQL: the catalog, in the writer's first
connection, before Alembic), and each refusal is one line naming what was found and what to
do. No byte of a DB that is not ours changes.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, field

from sqlalchemy import Connection, inspect, text

from results_db.dberrors import DBForeign, DBNewer
from results_db.schema.migrate import HEAD_REVISION, REVISIONS
from results_db.schema.tables import Base

OUR_TABLES = frozenset(Base.metadata.tables)
# Tables every gatesweep schema has had since revision 0001: a DB at an unknown revision that
# holds them is a newer gatesweep's (one that holds none is another tool's).
CORE = frozenset({"sweeps", "runs", "attempts"})
SHOWN = 5  # table names a message lists
# A table's columns, read as a query's (a plain SELECT: the SQLite reader's authorizer refuses
# PRAGMA table_info); the name is one of ours (OUR_TABLES), never the DB's text.
_NO_ROWS = 'SELECT * FROM "{}" WHERE 1 = 0'


@dataclass(frozen=True)
class Found:
    """What a DB holds: its tables (views excluded) and its Alembic revision (None: no
    ``alembic_version`` table, or an empty one); for a revision we do not know, the
    (table, column) pairs of those of its tables that are ours."""

    tables: frozenset[str]
    revision: str | None
    columns: frozenset[tuple[str, str]] = field(default=frozenset())


def _unknown(revision: str | None) -> bool:
    """A revision whose layout is not ours to assume: its columns are worth reading."""
    return revision is not None and revision not in REVISIONS


def found_sqlite(uri: str) -> Found:
    """Read through a ``query_only`` connection to ``uri`` (engine.sqlite_read_uri: never
    creating the file, never switching it to WAL, leaving no -wal/-shm behind)."""
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        conn.execute("PRAGMA query_only=ON")
        tables = frozenset(r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
        rev = None
        if "alembic_version" in tables:
            row = conn.execute("SELECT version_num FROM alembic_version LIMIT 1").fetchone()
            rev = row[0] if row else None
        cols = frozenset((t, d[0]) for t in sorted(tables & OUR_TABLES) if _unknown(rev)
                         for d in conn.execute(_NO_ROWS.format(t)).description)
    return Found(tables, rev, cols)


def found_on(conn: Connection) -> Found:
    """The same through a SQLAlchemy connection (PostgreSQL: the search_path's first schema,
    where Alembic would create our tables)."""
    tables = frozenset(inspect(conn).get_table_names())
    rev = None
    if "alembic_version" in tables:
        rev = conn.execute(text("SELECT version_num FROM alembic_version LIMIT 1")).scalar()
    cols = frozenset((t, c) for t in sorted(tables & OUR_TABLES) if _unknown(rev)
                     for c in conn.execute(text(_NO_ROWS.format(t))).keys())
    return Found(tables, rev, cols)


def lacking(found: Found) -> list[str]:
    """What this code reads that ``found`` does not have: ``table T`` and ``column T.C``
    (ours that it lacks; what it added is no concern of a reader)."""
    out = [f"table {t}" for t in sorted(OUR_TABLES - found.tables)]
    for t in sorted(OUR_TABLES & found.tables):
        out += [f"column {t}.{c.name}" for c in Base.metadata.tables[t].columns
                if (t, c.name) not in found.columns]
    return out


def judge(found: Found, where: str, *, write: bool, hint: str) -> str | None:
    """None for an empty DB or one of ours at a known revision; for a newer gatesweep's DB
    the warning a reader prints (a writer gets DBNewer); DBForeign for anything else.
    ``where`` names the DB, ``hint`` says where a new results DB could go instead."""
    if not found.tables:
        return None
    shown = ", ".join(sorted(found.tables)[:SHOWN]) + (" ..." if len(found.tables) > SHOWN
                                                       else "")
    if found.revision is None:
        clash = sorted(found.tables & OUR_TABLES)
        what = f" (its {', '.join(clash)} table{'s' if len(clash) > 1 else ''} not ours)" \
            if clash else ""
        raise DBForeign(f"{where} holds another tool's tables ({shown}){what} and no gatesweep "
                        f"schema: it is not a gatesweep results DB; refusing to use it: {hint}")
    if found.revision in REVISIONS:
        return None
    if not CORE <= found.tables:
        raise DBForeign(f"{where} holds another tool's migration history (alembic revision "
                        f"{found.revision!r}; tables {shown}): it is not a gatesweep results DB; "
                        f"refusing to use it: {hint}")
    newer = (f"{where} is at schema revision {found.revision!r}, which this gatesweep does "
             f"not know (its newest is {HEAD_REVISION!r}): a newer gatesweep migrated it")
    if write:
        raise DBNewer(f"{newer}; refusing to write to it: upgrade gatesweep to use it (read "
                      "commands still read it)")
    if missing := lacking(found):
        what = ", ".join(missing[:SHOWN]) + (f" and {len(missing) - SHOWN} more"
                                             if len(missing) > SHOWN else "")
        raise DBNewer(f"{newer}, and it lacks {what} that this gatesweep reads; refusing to "
                      "read it: upgrade gatesweep to use it")
    return f"{newer}; reading it anyway, but values it added may be missing or misread"
