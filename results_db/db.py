"""ResultsDB: one object per process holding a writer engine and a read-only reader engine."""

from __future__ import annotations

from sqlalchemy import URL, Engine

from results_db.analysis.api import AnalysisMixin
from results_db.engine import (
    check_writable,
    reader_engine,
    readonly_engine,
    sqlite_database,
    writer_engine,
)
from results_db.read.live import LiveMixin
from results_db.read.query import ReaderMixin, ReadOnlyQueryError
from results_db.schema.migrate import ensure_head
from results_db.write.decide_records import DecideRecordsMixin
from results_db.write.provenance import ProvenanceMixin
from results_db.write.sqlite_lock import write_lock_holder
from results_db.write.store import WriterMixin

__all__ = ["ReadOnlyQueryError", "ResultsDB"]


class ResultsDB(WriterMixin, ReaderMixin, AnalysisMixin, LiveMixin, ProvenanceMixin,
                DecideRecordsMixin):
    """Writes (WriterMixin, store.py), polars reads (ReaderMixin, query.py), conclusions
    (AnalysisMixin, analysis/api.py), live-run reads (LiveMixin, live.py), what produced
    each attempt (ProvenanceMixin, provenance.py) and what an adaptive sweep decided under
    which rule (DecideRecordsMixin, decide_records.py)."""

    def __init__(self, url: URL, migrate: bool = True, readonly: bool = False,
                 opened: tuple[Engine, str | None] | None = None) -> None:
        """``opened``: the read-only engine and schema note ``readonly_engine(url)`` gave
        (results_db.open opens it first, so a missing DB is refused before polars loads)."""
        self.url: URL = url
        self.readonly = readonly
        self._reader: Engine | None = None
        # a newer gatesweep's DB, read anyway: the warning a surface shows (ownership.py)
        self.schema_note: str | None = None
        if readonly:  # one read-only engine for everything: writes fail, nothing migrates
            self._reader, self.schema_note = opened or readonly_engine(url)
            self.engine: Engine = self._reader
            return
        self.engine = writer_engine(url)  # SQLite: another tool's file refused before connecting
        if migrate:
            ensure_head(self.engine, lambda: check_writable(self.engine, url))

    @property
    def reader(self) -> Engine:
        """The read-only engine (created lazily: the DB file must exist before mode=ro)."""
        if self._reader is None:
            self._reader = reader_engine(self.url)
        return self._reader

    def write_lock_holder(self) -> int | None:
        """SQLite: the pid holding the file's write lock now (results_db/write/sqlite_lock.py), or
        None; always None on PostgreSQL, whose server ends a frozen writer's session itself."""
        path = sqlite_database(self.url)
        return write_lock_holder(path) if path and path != ":memory:" else None

    def close(self) -> None:
        self.engine.dispose()
        if self._reader is not None and self._reader is not self.engine:
            self._reader.dispose()

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultsDB({self.url.render_as_string(hide_password=True)!r})"
