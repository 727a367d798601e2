"""The reader half of ResultsDB: polars DataFrames over the read-only engine.

``db.query(sql)`` runs user SQL on that engine, so writes are refused by the database itself
(SQLite: mode=ro + query_only + an authorizer; PostgreSQL: read-only transactions).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Iterable, Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy import (
    ColumnElement,
    Engine,
    Select,
    Text,
    and_,
    cast,
    func,
    literal_column,
    select,
    table,
)
from sqlalchemy.exc import DBAPIError, ResourceClosedError

from contract.config import RunSpec
from contract.ids import parse_id
from contract.states import DONE_BAD, DONE_OK, RunStatus, parse_status
from results_db.read.downsample import read_metrics
from results_db.rows import AttemptRow, RunRow
from results_db.schema.tables import DIM_COLUMNS, Artifact, Attempt, Base, Run, Summary, Sweep
from results_db.sqlread import (
    QueryLimitError,
    QueryLimits,
    fetch_capped,
    frame,
    rows_to_frame,
    user_frame,
)

RUN_COLUMNS: tuple[str, ...] = ("id", "name", "sweep_id", "fingerprint", "variant", "seed",
                                 "status", *DIM_COLUMNS, "params_total", "params_gates",
                                 "created", "updated")
# The DB's views (migration 0001, results_db/migrations/views.py), readable through db.view().
VIEWS: tuple[str, ...] = ("run_summary", "leaderboard")
_RO_MARKERS = ("readonly", "read-only", "read only", "not authorized", "query_only",
               "attempt to write", "prohibited")


class ReadOnlyQueryError(PermissionError):
    """User SQL tried to change the database through the read-only connection."""


def _user_sql_error(orig: BaseException) -> Exception:
    msg = str(orig).strip()
    if any(m in msg.lower() for m in _RO_MARKERS) or \
            type(orig).__name__ == "ReadOnlySqlTransaction":
        return ReadOnlyQueryError(
            "query: the results DB is opened read-only for queries, so statements that "
            f"write (INSERT/UPDATE/DELETE/DDL/PRAGMA/ATTACH) are refused ({msg})")
    return ValueError(f"query: the database rejected the SQL: {msg}")


def _pg_user_query(engine: Engine, sql: str, limits: QueryLimits) -> pl.DataFrame:
    import psycopg

    with engine.connect() as conn:
        raw: Any = conn.connection.dbapi_connection  # psycopg's: typed as plain DB-API
        assert raw is not None
        try:
            with raw.cursor() as cur, _cancel_on_sigterm():
                cur.execute("SET TRANSACTION READ ONLY")
                if limits.timeout_s is not None:  # the server stops it, whoever waits
                    cur.execute("SELECT set_config('statement_timeout', %s, true)",
                                (f"{max(1, round(limits.timeout_s * 1000))}ms",))
                cur.execute(sql, prepare=True)
                if cur.description is None:
                    raise ResourceClosedError("no rows")
                cols = [d.name for d in cur.description]
                rows = fetch_capped(cur, limits)
        except psycopg.errors.QueryCanceled as exc:
            if "statement timeout" in str(exc):
                raise QueryLimitError(f"query: stopped after {limits.timeout_s:g} s "
                                      "(--timeout); narrow the query or raise --timeout"
                                      ) from None
            raise _user_sql_error(exc) from None
        except psycopg.Error as exc:
            raise _user_sql_error(exc) from None
        finally:
            raw.rollback()
    return rows_to_frame(cols, rows)


@contextlib.contextmanager
def _cancel_on_sigterm() -> Iterator[None]:
    """While a PostgreSQL statement runs, SIGTERM raises SystemExit(143) in the waiting
    client, which psycopg answers by cancelling the statement on the server (Ctrl-C's
    KeyboardInterrupt does the same); a plain SIGTERM death left the query running there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(_sig: int, _frame: FrameType | None) -> None:
        raise SystemExit(143)

    old = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


# Membership in any of these lets SQL reach the server's files or run programs there, which no
# read-only transaction stops (COPY ... TO PROGRAM, pg_read_file, lo_import).
PG_SERVER_ROLES = ("pg_execute_server_program", "pg_read_server_files",
                   "pg_write_server_files")


def _pg_privilege(engine: Engine) -> str | None:
    """Why the connection's role may not run user SQL (None: an ordinary role)."""
    with engine.connect() as conn:
        raw: Any = conn.connection.dbapi_connection  # psycopg's: typed as plain DB-API
        assert raw is not None
        try:
            with raw.cursor() as cur:
                cur.execute("SELECT session_user, (SELECT rolsuper FROM pg_roles WHERE "
                            "rolname = session_user), ARRAY(SELECT r FROM unnest(%s::text[]) "
                            "r WHERE pg_has_role(session_user, r, 'USAGE'))",
                            (list(PG_SERVER_ROLES),))
                user, superuser, roles = cur.fetchone()
        finally:
            raw.rollback()
    if superuser:
        return f"role {user!r} is a PostgreSQL superuser"
    if roles:
        return f"role {user!r} holds {', '.join(roles)}"
    return None


class ReaderMixin:
    engine: Engine
    if TYPE_CHECKING:  # ResultsDB's property (an attribute annotation would clash with it)
        @property
        def reader(self) -> Engine: ...

    def _runs_stmt(self, with_config: bool = True,
                   columns: Sequence[str] | None = None) -> Select[Any]:
        if columns is not None:
            unknown = [c for c in columns if c not in RUN_COLUMNS]
            if unknown:
                raise ValueError(f"runs: unknown column(s) {', '.join(map(repr, unknown))}; "
                                 f"expected some of {', '.join(RUN_COLUMNS)}")
        cols = [getattr(Run, c) for c in (RUN_COLUMNS if columns is None else columns)]
        extra = [Sweep.name.label("sweep")]
        if with_config:  # config as its JSON text: no parse-and-dump round trip per row
            extra.append(cast(Run.config, Text).label("config"))
        return select(*cols, *extra).join(Sweep, Sweep.id == Run.sweep_id)

    def runs(self, sweep: str | None = None, status: str | Iterable[str] | None = None, *,
             with_config: bool = True, columns: Sequence[str] | None = None,
             **dims: Any) -> pl.DataFrame:
        """Runs with their dimension columns and ``sweep``; ``config`` is a JSON string column.

        Filters: ``sweep`` name, ``status`` (one or several), and any dimension column
        (``gate_position="G1"``, ``lr=[1e-3, 3e-3]``, ``variant="baseline"``...).
        ``with_config=False`` leaves the config JSON out; ``columns`` keeps only those of
        RUN_COLUMNS (plus ``sweep``), in that order: the dashboard's 19 columns over 10k runs
        read in a third of the time of all of them (the two timestamps cost most)."""
        stmt = self._runs_stmt(with_config, columns).order_by(Run.id)
        if sweep is not None:
            stmt = stmt.where(Sweep.name == sweep)
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            stmt = stmt.where(Run.status.in_([parse_status(s).value for s in statuses]))
        for key, value in dims.items():
            if key not in RUN_COLUMNS:
                raise ValueError(f"runs: unknown filter {key!r}; expected sweep, status or "
                                 f"one of {', '.join(RUN_COLUMNS)}")
            col = getattr(Run, key)
            many = isinstance(value, (list, tuple, set))
            stmt = stmt.where(col.in_(list(value)) if many else
                              (col.is_(None) if value is None else col == value))
        return frame(self.reader, stmt)

    def run(self, id_or_name: int | str) -> RunRow | None:
        """One run by id (int or digit string) or by name (the newest run with that name)."""
        from sqlalchemy.orm import Session

        rid = parse_id(id_or_name)  # the one id rule (contract/ids.py): else a name
        with Session(self.reader) as s:
            if rid is not None:
                row = s.get(Run, rid)
                if row is not None or isinstance(id_or_name, int):
                    return None if row is None else RunRow.of(row)
            row = s.scalar(select(Run).where(Run.name == str(id_or_name))
                           .order_by(Run.id.desc()).limit(1))
            return None if row is None else RunRow.of(row)

    def sweeps(self) -> pl.DataFrame:
        return frame(self.reader, select(Sweep.id, Sweep.name, Sweep.description,
                                         Sweep.created, Sweep.spec).order_by(Sweep.id))

    def sweep_status(self, sweep: str | None = None) -> pl.DataFrame:
        """Per sweep: one count column per run state, ``total`` and ``done`` (ended for good:
        states.DONE_OK | DONE_BAD; a lost run is resumable, so not done)."""
        where = "WHERE w.name = :sweep" if sweep is not None else ""
        df = frame(self.reader, f"""SELECT w.name AS sweep, r.status AS status,
            COUNT(r.id) AS n FROM sweeps w LEFT JOIN runs r ON r.sweep_id = w.id {where}
            GROUP BY w.name, r.status ORDER BY w.name""", {"sweep": sweep})
        states = [s.value for s in RunStatus]
        if df.height == 0:
            return pl.DataFrame({"sweep": [], **{s: [] for s in states}, "total": [],
                                 "done": []}, schema_overrides={c: pl.Int64 for c in
                                                                [*states, "total", "done"]})
        exprs = [pl.col("n").filter(pl.col("status") == s).sum().alias(s) for s in states]
        out = df.group_by("sweep", maintain_order=True).agg(exprs)
        terminal = [s.value for s in RunStatus if s in DONE_OK | DONE_BAD]
        return out.with_columns(total=pl.sum_horizontal(states),
                                done=pl.sum_horizontal(terminal))

    def attempts(self, run_id: int) -> list[AttemptRow]:
        """The run's attempts as AttemptRow objects, oldest first."""
        from sqlalchemy.orm import Session

        with Session(self.reader) as s:
            return [AttemptRow.of(a) for a in s.scalars(
                select(Attempt).where(Attempt.run_id == run_id).order_by(Attempt.number))]

    def artifact_paths(self, run_id: int, kind: str) -> list[str | None]:
        """The paths of run ``run_id``'s artifacts of ``kind`` (its checkpoints, its
        checkpoint dir), oldest first: one column, not ``artifacts``' JSON documents."""
        from sqlalchemy.orm import Session

        with Session(self.reader) as s:
            return list(s.scalars(select(Artifact.path).where(
                Artifact.run_id == run_id, Artifact.kind == kind).order_by(Artifact.id)))

    def artifacts(self, run_id: int) -> pl.DataFrame:
        # data as its JSON text (as runs' config): a JSON column has no one polars type
        return frame(self.reader, select(Artifact.id, Artifact.run_id, Artifact.attempt_id,
                                         Artifact.kind, Artifact.path,
                                         cast(Artifact.data, Text).label("data"),
                                         Artifact.created)
                     .where(Artifact.run_id == run_id).order_by(Artifact.id))

    def summaries(self, run_ids: Sequence[int] | None = None, names: Sequence[str] | None = None,
                  sweep: str | None = None) -> pl.DataFrame:
        """Long frame: run_id, run (name), sweep, variant, seed, status, name, value."""
        stmt = (select(Summary.run_id, Run.name.label("run"), Sweep.name.label("sweep"),
                       Run.variant, Run.seed, Run.status, Summary.name, Summary.value)
                .join(Run, Run.id == Summary.run_id).join(Sweep, Sweep.id == Run.sweep_id))
        conds: list[ColumnElement[bool]] = []
        if run_ids is not None:
            conds.append(Summary.run_id.in_(list(run_ids)))
        if names is not None:
            conds.append(Summary.name.in_(list(names)))
        if sweep is not None:
            conds.append(Sweep.name == sweep)
        if conds:
            stmt = stmt.where(and_(*conds))
        return frame(self.reader, stmt.order_by(Summary.run_id, Summary.name))

    def metrics(self, run_ids: Sequence[int] | None = None, names: Sequence[str] | None = None,
                max_points: int | None = None) -> pl.DataFrame:
        """Points (run_id, name, step, value), ordered. ``max_points`` downsamples in SQL per
        (run, name) keeping each step bucket's min, max, last point and one NaN (its first)
        (downsample.py, which reads the rollup table where the DB has one); a series of at
        most ``max_points`` points comes back whole."""

        return read_metrics(self.reader, run_ids, names, max_points)

    def curves(self, run_ids: Sequence[int], names: Sequence[str],
               max_points: int | None = None) -> pl.DataFrame:
        """Training curves for display: ``metrics`` of those runs and names, downsampled to
        ``max_points`` per series (run_id, name, step, value)."""
        return self.metrics(run_ids=list(run_ids), names=list(names), max_points=max_points)

    def summary_names(self, sweep: str | None = None) -> list[str]:
        """The distinct summary names of the sweep's runs (all sweeps: None), sorted."""
        stmt = select(Summary.name).distinct()
        if sweep is not None:
            stmt = (stmt.join(Run, Run.id == Summary.run_id)
                    .join(Sweep, Sweep.id == Run.sweep_id).where(Sweep.name == sweep))
        df = frame(self.reader, stmt)
        return sorted(df["name"].to_list()) if df.height else []

    def tokens_per_step(self, sweep: str) -> dict[int, int]:
        """{run id: tokens per optimizer step} (RunSpec.tokens_per_step of its config; runs
        whose stored config is not a valid RunSpec are left out)."""

        from pydantic import ValidationError


        df = frame(self.reader, select(Run.id, cast(Run.config, Text).label("config"))
                   .join(Sweep, Sweep.id == Run.sweep_id).where(Sweep.name == sweep))
        out: dict[int, int] = {}
        for run_id, config in df.iter_rows():
            try:
                out[int(run_id)] = RunSpec.model_validate(json.loads(config)).tokens_per_step
            except (ValidationError, ValueError, TypeError):
                continue
        return out

    def row_counts(self) -> dict[str, int]:
        """{table name: rows} for every table of the schema (one COUNT(*) each), e.g. for a
        benchmark's "nothing was lost" check."""
        with self.reader.connect() as conn:
            return {name: int(conn.execute(select(func.count()).select_from(t)).scalar_one())
                    for name, t in sorted(Base.metadata.tables.items())}

    def view(self, name: str) -> pl.DataFrame:
        """All rows of one of the DB's SQL views (VIEWS: ``run_summary``, ``leaderboard``),
        as a DataFrame -- what ``SELECT * FROM <view>`` shows a user."""
        if name not in VIEWS:
            raise ValueError(f"view: unknown view {name!r}; expected one of {', '.join(VIEWS)}")
        return frame(self.reader, select(literal_column("*")).select_from(table(name)))

    def query(self, sql: str, limits: QueryLimits | None = None) -> pl.DataFrame:
        """Run one user SQL statement on the read-only connection and return its rows.

        Writes are refused by the database (ReadOnlyQueryError). On PostgreSQL the statement
        is prepared (so ``a; b`` is rejected: no ``COMMIT; SET ...`` escape) and runs in a
        READ ONLY transaction that is always rolled back (so a ``SET`` does not persist).
        ``limits`` (default QueryLimits(): 60 s, 1M rows, 256 MiB) bound time, rows and
        bytes (QueryLimitError); Ctrl-C stops the statement (PostgreSQL: cancelled on the
        server, SIGTERM too)."""
        limits = limits or QueryLimits()
        try:
            if self.reader.dialect.name == "postgresql":
                return _pg_user_query(self.reader, sql, limits)
            return user_frame(self.reader, sql, limits)
        except DBAPIError as exc:
            raise _user_sql_error(exc.orig or exc) from None
        except pl.exceptions.DuplicateError as exc:  # a frame's columns must be unique
            raise ValueError(f"query: {exc}; give each result column its own name "
                             "(... AS name)") from None
        except ResourceClosedError:
            raise ValueError("query: the statement returned no rows; db.query is for "
                             "SELECT-like statements") from None

    def query_privilege(self) -> str | None:
        """Why user SQL on this DB could do more than read it (None: it cannot). A PostgreSQL
        superuser, or a role holding PG_SERVER_ROLES, reaches the server's files and programs
        from a read-only transaction; SQLite's connection is confined to the file."""
        if self.reader.dialect.name != "postgresql":
            return None
        return _pg_privilege(self.reader)

    # leaderboard, ablation_table, effects, stability, max_stable_lr: AnalysisMixin
    # (results_db/analysis/api.py)
