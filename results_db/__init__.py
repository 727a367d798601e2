"""results_db: the SQL results store, source of truth for run state (docs/architecture.md).

    import results_db
    db = results_db.open()          # $GATESWEEP_DB or sqlite:///results.db; migrates on open
    sweep_id = db.ensure_sweep("gates-toy", yaml_text)
    res = db.register_runs(sweep_id, [results_db.NewRun(...)])
    att = db.start_attempt(run.id, host="node1")
    db.log_metrics(run.id, att.id, [(10, "train/loss", 3.2)])
    db.finish_attempt(att.id, "succeeded")
    db.runs(sweep="gates-toy")      # polars DataFrame

No torch here, and polars/alembic are imported only where needed, so this imports fast: the
names whose modules import polars (ResultsDB, the query limits: ``_LAZY``) load on first use.

  db.py            ResultsDB: one object per process, a writer and a read-only reader engine
  engine.py        the engines for one URL (SQLite WAL, PostgreSQL), URL rules, backups
  rows.py          plain value objects exchanged with the orchestrator
  sqlread.py       SQL rows -> polars frames, under both the write and the read rooms
  dberrors.py      the errors that name the DB it could not open or write
  schema/          the tables, migrations' driver, vocabulary and dimension columns
  write/           the write path (WriterMixin, claims, rollup, provenance)
  read/            the read path (ReaderMixin, frames, downsampling, live runs)
  analysis/        what a result means, decided once (AnalysisMixin)
  migrations/      the Alembic environment and revisions

Floors, lowest first (tests/test_architecture.py): dberrors.py; schema/; engine.py, rows.py,
sqlread.py and analysis/'s pure rules; write/; read/; analysis/api.py; db.py; this front door.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sqlalchemy import URL

from contract.states import DONE_OK, TERMINAL, InvalidTransition, RunStatus
from results_db.engine import (
    DEFAULT_URL,
    DBForeign,
    DBNewer,
    DBNotFound,
    DBOutdated,
    DBUnavailable,
    DBUnreadable,
    absolute_url,
    backup_sqlite,
    check_writable,
    default_url,
    readonly_engine,
    redacted,
    resolve_url,
    sqlite_database,
    writer_engine,
)
from results_db.rows import (
    AttemptRow,
    AttemptWrite,
    NewArtifact,
    NewRun,
    RegisterResult,
    RunRow,
)
from results_db.schema.migrate import current_revision, upgrade_engine
from results_db.schema.vocab import DIMENSIONS, VERDICTS
from results_db.write.claims import NotFound

if TYPE_CHECKING:
    from results_db.db import ReadOnlyQueryError, ResultsDB
    from results_db.sqlread import QueryLimitError, QueryLimits

# Served on first use (``__getattr__``): their modules import polars, which a command that
# never reads a frame (``--help``, ``validate``) should not pay for.
_LAZY = {"ResultsDB": "results_db.db", "ReadOnlyQueryError": "results_db.db",
         "QueryLimitError": "results_db.sqlread", "QueryLimits": "results_db.sqlread"}

__all__ = ["DEFAULT_URL", "default_url", "DIMENSIONS", "DONE_OK", "VERDICTS", "AttemptRow",
           "AttemptWrite", "NewArtifact",
           "DBForeign", "DBNewer", "DBNotFound", "DBOutdated", "DBUnavailable", "DBUnreadable",
           "InvalidTransition",
           "NewRun", "NotFound", "QueryLimitError", "QueryLimits", "ReadOnlyQueryError",
           "absolute_url", "redacted",
           "sqlite_database", "backup_sqlite", "RegisterResult", "ResultsDB", "RunRow", "RunStatus",
           "TERMINAL", "open", "upgrade"]


def open(url: str | URL | None = None, migrate: bool = True,  # noqa: A001
         readonly: bool = False) -> ResultsDB:
    """Open (and create/upgrade, unless ``migrate=False``) the results DB at ``url``.

    ``url`` None -> ``$GATESWEEP_DB`` or ``sqlite:///results.db``. Open it in each process
    (after a fork, not before): engines hold connections that must not cross processes.
    ``readonly=True`` (every read-only surface: CLI reads, the dashboard): the DB must exist
    (``DBNotFound`` otherwise) and be at the current schema (``DBOutdated``); it is never
    created, migrated or switched to WAL, and its bytes never change (SQLite ``mode=ro``).
    """
    u = resolve_url(url)
    # a missing or outdated DB refused before the read machinery (polars) loads: ``validate``
    opened = readonly_engine(u) if readonly else None
    from results_db.db import ResultsDB

    return ResultsDB(u, migrate=migrate and not readonly, readonly=readonly, opened=opened)


def upgrade(url: str | URL | None = None, revision: str = "head") -> str:
    """Run the Alembic migrations up to ``revision``; returns the DB's revision after."""
    u = resolve_url(url)
    engine = writer_engine(u)  # SQLite: another tool's or a newer gatesweep's file refused
    try:
        check_writable(engine, u)  # PostgreSQL: the same, before Alembic touches anything
        upgrade_engine(engine, revision)
        return current_revision(engine) or ""
    finally:
        engine.dispose()


def __getattr__(name: str) -> Any:
    """The names of ``_LAZY``, imported on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'results_db' has no attribute {name!r}")
