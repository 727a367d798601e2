"""ProvenanceMixin: what produced each attempt, written and read.

The trainer records one provenance document per attempt at its start (contract/provenance.py
names the fields, which are the ``provenance`` table's columns); the DB reporter hands it to
``record_provenance``. Reads are polars frames; whether the runs a table compares came from
different code or packages is decided in results_db/analysis/mixing.py over them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy import Engine, Text, cast, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from contract.provenance import FIELDS
from contract.states import DONE_OK
from results_db.analysis.mixing import INIT, code_mix
from results_db.schema.tables import Attempt, Provenance, Run, Sweep, utcnow
from results_db.sqlread import frame
from results_db.write.prepared import Prepared, arg

if TYPE_CHECKING:
    from results_db.analysis.mixing import CodeMix

_REQUIRED = ("source", "code_version", "accelerator")
_INTS = ("device_count", "cpu_threads", "world_size")
# What a provenance read returns besides the recorded fields: which run and attempt it is.
KEYS: tuple[str, ...] = ("run_id", "run", "sweep", "variant", "status", "attempt",
                         "attempt_id")


def check_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The provenance row of ``doc``; a document with unknown keys, without the required ones
    or with a wrong type is one ValueError naming the key (nothing is written)."""
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise ValueError(f"provenance: unknown key(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(FIELDS)}")
    missing = [k for k in _REQUIRED if not doc.get(k)]
    if missing:
        raise ValueError(f"provenance: {', '.join(missing)} must be given (a non-empty string)")
    row = {k: doc.get(k) for k in FIELDS}
    for k in _INTS:
        v = row[k]
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise ValueError(f"provenance: {k} must be an integer, got {v!r}")
    for k in FIELDS:
        v = row[k]
        if k not in _INTS and k not in ("dirty", "deepspeed_config") and v is not None \
                and not isinstance(v, str):
            raise ValueError(f"provenance: {k} must be a string, got {type(v).__name__}")
    if row["dirty"] is not None and not isinstance(row["dirty"], bool):
        raise ValueError(f"provenance: dirty must be true/false, got {row['dirty']!r}")
    if row["deepspeed_config"] is not None and not isinstance(row["deepspeed_config"], dict):
        raise ValueError("provenance: deepspeed_config must be a mapping")
    row["device_count"] = row["device_count"] or 0
    row["world_size"] = row["world_size"] or 1
    return row


def upsert_provenance(s: Session, run_id: int, attempt_id: int, doc: Mapping[str, Any]) -> None:
    """In the caller's transaction: attempt ``attempt_id``'s provenance row, replaced when
    it exists (a retried write)."""
    values = {"attempt_id": attempt_id, "run_id": run_id, "recorded": utcnow(),
              **check_document(doc)}
    conn = s.connection()
    _upsert(conn.dialect.name).run(conn, values)


_UPSERT_COLUMNS = ("attempt_id", "run_id", "recorded", *FIELDS)  # check_document fills each
_UPSERTS: dict[str, Prepared] = {}


def _upsert(dialect: str) -> Prepared:
    """The upsert of ``dialect``, built and compiled once (results_db/write/prepared.py): built and
    keyed at every write, the ~30-column upsert cost about 2 % of a short trial's CPU
    (docs/benchmarks.md, round 5)."""
    stmt = _UPSERTS.get(dialect)
    if stmt is None:
        def build() -> Any:
            cols = Provenance.__table__.c
            ins = (sqlite_insert if dialect == "sqlite" else pg_insert)(Provenance).values(
                {k: arg(k, cols[k].type) for k in _UPSERT_COLUMNS})
            return ins.on_conflict_do_update(
                index_elements=["attempt_id"],  # each value bound once: excluded.col
                set_={k: ins.excluded[k] for k in _UPSERT_COLUMNS if k != "attempt_id"})

        stmt = _UPSERTS[dialect] = Prepared(build)
    return stmt


class ProvenanceMixin:
    engine: Engine
    if TYPE_CHECKING:  # ResultsDB's property (an attribute annotation would clash with it)
        @property
        def reader(self) -> Engine: ...

    def record_provenance(self, run_id: int, attempt_id: int, doc: Mapping[str, Any]) -> None:
        """Store attempt ``attempt_id``'s provenance (a retried write replaces it)."""
        with Session(self.engine) as s, s.begin():
            upsert_provenance(s, run_id, attempt_id, doc)

    def provenance(self, run_ids: Sequence[int] | None = None, *, sweep: str | None = None,
                   states: Collection[str] | None = None, latest: bool = False) -> pl.DataFrame:
        """One row per attempt that recorded its provenance, oldest first: KEYS, then the
        recorded fields (contract.provenance.FIELDS; ``deepspeed_config`` as JSON text) and
        ``recorded``. ``latest``: per run only its newest such attempt (the one whose
        numbers the run's summaries hold), plus ``n_code_versions`` over all its attempts
        (2+: the run was resumed on other code than it started with)."""
        cols = [getattr(Provenance, k) for k in FIELDS if k != "deepspeed_config"]
        stmt = (select(Run.id.label("run_id"), Run.name.label("run"), Sweep.name.label("sweep"),
                       Run.variant, Run.status, Attempt.number.label("attempt"),
                       Provenance.attempt_id, *cols,
                       cast(Provenance.deepspeed_config, Text).label("deepspeed_config"),
                       Provenance.recorded)
                .join(Attempt, Attempt.id == Provenance.attempt_id)
                .join(Run, Run.id == Provenance.run_id).join(Sweep, Sweep.id == Run.sweep_id))
        if run_ids is not None:
            stmt = stmt.where(Run.id.in_(list(run_ids)))
        if sweep is not None:
            stmt = stmt.where(Sweep.name == sweep)
        if states is not None:
            stmt = stmt.where(Run.status.in_(list(states)))
        df = frame(self.reader, stmt.order_by(Run.id, Attempt.number))
        df = df.select(*KEYS, *FIELDS, "recorded")
        if not latest:
            return df
        n = df.group_by("run_id").agg(pl.col("code_version").n_unique()
                                      .alias("n_code_versions"))
        return (df.group_by("run_id", maintain_order=True).last()
                .join(n, on="run_id", how="left", maintain_order="left"))

    def code_mix(self, sweep: str, states: Collection[str] = DONE_OK) -> CodeMix:
        """Whether the sweep's runs in ``states`` (the ones its tables compare) were trained
        by different code or packages, or initialised by different schemes
        (results_db/analysis/mixing.py): ``.sentence`` says it in one sentence, None when they
        were not (or no run recorded its provenance and one scheme was used)."""

        runs = frame(self.reader, select(Run.id.label("run_id"),  # null: stored without it
                                         Run.config[("model", INIT)].as_string().label(INIT))
                     .join(Sweep, Sweep.id == Run.sweep_id)
                     .where(Sweep.name == sweep, Run.status.in_(list(states))))
        return code_mix(runs, self.provenance(sweep=sweep, states=states, latest=True))

    def runs_by_code(self, sweep: str, other_than: str,
                     states: Sequence[str] | None = None) -> list[int]:
        """Ids of the sweep's runs (in ``states``; None: any) whose result was not trained by
        code version ``other_than`` (contract.provenance.CodeVersion.key): recorded with
        another one, or with none at all (trained before provenance was recorded)."""
        runs = frame(self.reader, select(Run.id.label("run_id"), Run.status)
                     .join(Sweep, Sweep.id == Run.sweep_id).where(Sweep.name == sweep)
                     .order_by(Run.id))
        if states is not None:
            runs = runs.filter(runs["status"].is_in(list(states)))
        latest = self.provenance(sweep=sweep, latest=True)
        same = set(latest.filter(latest["code_version"] == other_than)["run_id"].to_list())
        return [int(r) for r in runs["run_id"].to_list() if r not in same]

