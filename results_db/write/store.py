"""The writer half of ResultsDB: sweeps, runs, attempts, metrics, summaries, artifacts.

Every write is one short transaction (SQLite: BEGIN IMMEDIATE, see engine.py). Status changes
go through states.check_transition. Metric and summary writes are idempotent upserts keyed by
(run, name, step) / (run, name): a retried attempt that re-logs a step replaces the point.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from contract.metrics import PARAMS_GATES, PARAMS_TOTAL
from contract.states import DONE_OK, RunStatus, allowed, check_transition, parse_status
from results_db.rows import AttemptWrite, NewRun, RegisterResult, RunRow
from results_db.schema.dims import derive_dims
from results_db.schema.tables import Artifact, Run, Sweep, utcnow
from results_db.write import rollup
from results_db.write.claims import (
    ClaimMixin,
    NotFound,
    beat_if_current,
    close_attempts,
    end_run,
)
from results_db.write.multirow import execute_rows
from results_db.write.prepared import Prepared, arg
from results_db.write.provenance import upsert_provenance

Point = tuple[int, str, float | None]
__all__ = ["NotFound", "WriterMixin", "clean_value"]


def clean_value(value: Any) -> float | None:
    """NaN -> None (SQLite cannot store NaN; NULL means "not a number" in this schema)."""
    if value is None:
        return None
    v = float(value)
    return None if math.isnan(v) else v


class WriterMixin(ClaimMixin):
    """Sweeps, runs, values; attempts and claims come from ClaimMixin (claims.py)."""

    engine: Engine

    @contextmanager
    def _tx(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            yield s

    # --- sweeps and runs -------------------------------------------------------------------
    def ensure_sweep(self, name: str, spec_text: str = "", description: str = "") -> int:
        """Insert the sweep, or update its spec/description; returns its id. Safe when several
        processes ensure the same sweep at once (insert-or-ignore, then update)."""
        if not name:
            raise ValueError("ensure_sweep: name must be a non-empty string")
        with self._tx() as s:
            ins = (sqlite_insert if self.engine.dialect.name == "sqlite" else pg_insert)(Sweep)
            s.execute(ins.values(name=name, spec=spec_text, description=description,
                                 created=utcnow()).on_conflict_do_nothing(
                index_elements=["name"]))
            sweep = s.scalars(select(Sweep).where(Sweep.name == name)
                              .with_for_update()).one()
            sweep.spec = spec_text or sweep.spec
            sweep.description = description or sweep.description
            return sweep.id

    def register_runs(self, sweep_id: int, runs: Sequence[NewRun],
                      force: bool = False) -> RegisterResult:
        """New fingerprints -> pending; succeeded/diverged -> cached (unless force); failed/
        lost/cancelled/pending -> pending again (to_run); running -> left alone (running).
        A fingerprint listed twice counts once."""
        cached: list[Run] = []
        to_run: list[Run] = []
        running: list[Run] = []
        with self._tx() as s:
            # Row lock on the sweep (PostgreSQL; SQLite's BEGIN IMMEDIATE already serialises):
            # two submits of one sweep register one after the other, no duplicate inserts.
            if s.get(Sweep, sweep_id, with_for_update=True) is None:
                raise NotFound(f"register_runs: sweep id {sweep_id} does not exist")
            existing = _runs_by_fingerprint(s, [r.fingerprint for r in runs])
            seen: set[str] = set()
            now = utcnow()
            for new in runs:
                if new.fingerprint in seen:
                    continue
                seen.add(new.fingerprint)
                row = existing.get(new.fingerprint)
                if row is None:
                    row = _new_run(sweep_id, new, now)
                    s.add(row)
                    to_run.append(row)
                elif row.status == RunStatus.RUNNING:
                    running.append(row)
                elif row.status in DONE_OK and not force:
                    cached.append(row)
                else:
                    row.status = check_transition(row.id, row.status, RunStatus.PENDING)
                    row.updated = now
                    to_run.append(row)
            s.flush()
            return RegisterResult(cached=[RunRow.of(r) for r in cached],
                                  to_run=[RunRow.of(r) for r in to_run],
                                  running=[RunRow.of(r) for r in running])

    def set_status(self, run_ids: Iterable[int], status: str | RunStatus,
                   strict: bool = False,
                   only_from: Collection[RunStatus] | None = None) -> list[int]:
        """Cancel / rerun: set each run's status where the state machine allows it.

        Returns the ids changed; disallowed ones are skipped (``strict=True`` raises instead).
        ``only_from``: change only runs now in one of these states (read under the same lock).
        Cancelling or re-queueing also closes the run's still-running attempts as cancelled.
        """
        dst = parse_status(status)
        changed: list[int] = []
        q = select(Run).where(Run.id.in_(list(run_ids)))
        if only_from is not None:
            q = q.where(Run.status.in_([st.value for st in only_from]))
        with self._tx() as s:
            for run in s.scalars(q.with_for_update()):
                if not allowed(run.status, dst):
                    if strict:
                        check_transition(run.id, run.status, dst)
                    continue
                run.status, run.updated = dst, utcnow()
                if dst in (RunStatus.CANCELLED, RunStatus.PENDING):
                    close_attempts(s, run.id, RunStatus.CANCELLED, f"run set to {dst}")
                changed.append(run.id)
        return sorted(changed)

    # --- values --------------------------------------------------------------------------
    def log_metrics(self, run_id: int, attempt_id: int | None,
                    points: Iterable[Point]) -> int:
        """Batched, idempotent per (run, name, step): the last value wins. Returns rows sent.

        SQLite: one executemany of an upsert (duplicates inside the batch resolve row by row).
        PostgreSQL: multi-row VALUES upserts, so the batch is de-duplicated first (one
        statement may not touch a row twice)."""
        rows = _metric_rows(run_id, attempt_id, points)
        if not rows:
            return 0
        with self.engine.begin() as conn:
            _upsert_metrics(conn, run_id, rows)
        return len(rows)

    def log_summaries(self, run_id: int, attempt_id: int | None,
                      values: Mapping[str, float | None]) -> None:
        """Upsert per (run, name). ``params/total``/``params/gates`` also fill the run's
        params columns."""
        if not values:
            return
        with self._tx() as s:
            _upsert_summaries(s, run_id, attempt_id, values)

    def write_if_current(self, run_id: int, attempt_id: int, write: AttemptWrite) -> bool:
        """A trial's flush in one transaction: its heartbeat, metric points, summaries,
        artifacts, provenance and (``write.end``) its end -- or nothing at all, and False,
        when ``attempt_id`` is no longer the run's current attempt. One transaction where a
        2-step trial took seven (docs/benchmarks.md "Per-run overhead")."""
        rows = _metric_rows(run_id, attempt_id, write.points)
        end = None if write.end is None else parse_status(write.end)
        with self._tx() as s:
            if not beat_if_current(s, attempt_id, "write_if_current", run_id, end=end):
                return False
            if rows:
                _upsert_metrics(s.connection(), run_id, rows)
            params = _upsert_summaries(s, run_id, attempt_id, write.summaries,
                                       update_run=end is None)
            if write.artifacts:  # one batch (psycopg pipelines it: one round trip)
                now = utcnow()
                _NEW_ARTIFACT.run(s.connection(), [
                    {"run_id": run_id, "attempt_id": attempt_id, "kind": a.kind,
                     "path": a.path, "data": a.data, "created": now}
                    for a in write.artifacts])
            if write.provenance is not None:
                upsert_provenance(s, run_id, attempt_id, write.provenance)
            if end is not None:
                end_run(s, run_id, end, **params)
        return True

    def add_artifact(self, run_id: int, attempt_id: int | None, kind: str,
                     path: str | None = None, data: Any = None) -> int:
        with self._tx() as s:
            art = Artifact(run_id=run_id, attempt_id=attempt_id, kind=kind,
                           path=None if path is None else str(path), data=data)
            s.add(art)
            s.flush()
            return art.id


def _metric_rows(run_id: int, attempt_id: int | None, points: Iterable[Point]
                 ) -> list[tuple[int, int | None, int, str, float | None]]:
    try:  # fast path: plain numbers; NaN -> None (NaN != NaN)
        return [(run_id, attempt_id, int(step), name, v if v == v else None)
                for step, name, value in points
                for v in (float(value),)]  # type: ignore[arg-type]  # None: TypeError
    except TypeError:  # a None value somewhere: the careful path
        return [(run_id, attempt_id, int(step), name, clean_value(value))
                for step, name, value in points]


def _upsert_metrics(conn: Connection, run_id: int,
                    rows: list[tuple[int, int | None, int, str, float | None]]) -> None:
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(_SQLITE_METRIC_UPSERT, rows)
    else:
        # one statement may not update a row twice: the batch's last value per key wins
        execute_rows(conn, _PG_METRIC_UPSERT, list({(r[3], r[2]): r for r in rows}.values()),
                     _METRIC_TYPES)
    rollup.update(conn, run_id, rows)  # the curves' rollup, in the same transaction


def _upsert_summaries(s: Session, run_id: int, attempt_id: int | None,
                      values: Mapping[str, float | None], *, update_run: bool = True
                      ) -> dict[str, int]:
    """Upsert the summaries in one multi-row statement; returns the run's params columns
    they fill (``params/total``/``params/gates``), written here unless ``update_run`` is
    False (the caller's own UPDATE of the run carries them)."""
    if not values:
        return {}
    execute_rows(s.connection(), _SUMMARY_UPSERT,
                 [(run_id, attempt_id, k, clean_value(v)) for k, v in values.items()],
                 _SUMMARY_TYPES)
    params = {col: int(v) for key, col in
              ((PARAMS_TOTAL, "params_total"), (PARAMS_GATES, "params_gates"))
              if (v := values.get(key)) is not None and not math.isnan(float(v))}
    if params and update_run:
        s.connection().execute(update(Run).where(Run.id == run_id).values(**params))
    return params


_NEW_ARTIFACT = Prepared(lambda: insert(Artifact).values(
    {k: arg(k) for k in ("run_id", "attempt_id", "kind", "path", "data", "created")}))
_SUMMARY_UPSERT = (
    "INSERT INTO summaries (run_id, attempt_id, name, value) {values} "
    "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value, "
    "attempt_id = excluded.attempt_id")
_SUMMARY_TYPES = ("int8", "int8", "text", "float8")  # (run_id, attempt_id, name, value)
_SQLITE_METRIC_UPSERT = (
    "INSERT INTO metrics (run_id, attempt_id, step, name, value) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (run_id, name, step) DO UPDATE SET value = excluded.value, "
    "attempt_id = excluded.attempt_id")
_PG_METRIC_UPSERT = (
    "INSERT INTO metrics (run_id, attempt_id, step, name, value) {values} "
    "ON CONFLICT (run_id, name, step) DO UPDATE SET value = excluded.value, "
    "attempt_id = excluded.attempt_id")
_METRIC_TYPES = ("int8", "int8", "int8", "text", "float8")  # _metric_rows' tuples


def _new_run(sweep_id: int, new: NewRun, now: Any) -> Run:
    if not new.name or not new.fingerprint:
        raise ValueError(f"register_runs: run {new!r} needs a non-empty name and fingerprint")
    return Run(sweep_id=sweep_id, name=new.name, fingerprint=new.fingerprint,
               variant=new.variant, seed=new.seed, status=RunStatus.PENDING,
               config=new.config, params_total=new.params_total,
               params_gates=new.params_gates, created=now, updated=now,
               **derive_dims(new.config))


def _runs_by_fingerprint(s: Session, fps: list[str], chunk: int = 5000) -> dict[str, Run]:
    """Existing runs by fingerprint, in chunks (bound-parameter limits of both dialects)."""
    out: dict[str, Run] = {}
    for i in range(0, len(fps), chunk):
        out.update((r.fingerprint, r) for r in s.scalars(
            select(Run).where(Run.fingerprint.in_(fps[i:i + chunk]))))
    return out
