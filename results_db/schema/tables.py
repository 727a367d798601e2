"""The results schema as typed SQLAlchemy 2 ORM classes (the migration in migrations/ creates it).

Timestamps are UTC: stored naive (both dialects agree on that), returned timezone-aware.
Metric/summary values: NaN is stored as NULL (SQLite cannot store NaN), so NULL means "not a
number" (a diverged run's loss), never "missing" -- a missing point has no row.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from contract import dimensions
from contract.states import RunStatus


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Naive-UTC storage, aware-UTC in Python: the same on SQLite and PostgreSQL."""
    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    pass


class Sweep(Base):
    __tablename__ = "sweeps"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    spec: Mapped[str] = mapped_column(Text, default="")
    description: Mapped[str] = mapped_column(Text, default="")
    created: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


# The columns of `runs` derived from the config JSON (results_db/schema/dims.py) so SQL can
# group: the run dimensions (contract/dimensions.py), the gate count and the grouping keys.
DIM_COLUMNS: tuple[str, ...] = (*dimensions.COLUMNS, "n_gates", "group_key", "lr_group_key")


class Run(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(300), index=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"), index=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    variant: Mapped[str] = mapped_column(String(200), default="")
    seed: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.PENDING.value, index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    gate_position: Mapped[str | None] = mapped_column(String(32))
    gate_granularity: Mapped[str | None] = mapped_column(String(64))
    gate_sharing: Mapped[str | None] = mapped_column(String(64))
    gate_combine: Mapped[str | None] = mapped_column(String(64))
    gate_activation: Mapped[str | None] = mapped_column(String(64))
    gate_input_dependent: Mapped[bool | None] = mapped_column(Boolean)
    n_gates: Mapped[int] = mapped_column(Integer, default=0)
    nonlinearity: Mapped[str | None] = mapped_column(String(32))
    lr: Mapped[float | None] = mapped_column(Float)
    n_layer: Mapped[int | None] = mapped_column(Integer)
    d_model: Mapped[int | None] = mapped_column(Integer)
    n_head: Mapped[int | None] = mapped_column(Integer)
    n_kv_head: Mapped[int | None] = mapped_column(Integer)
    moe_experts: Mapped[int | None] = mapped_column(Integer)
    norm_style: Mapped[str | None] = mapped_column(String(32))
    switch_head: Mapped[str | None] = mapped_column(String(8))  # targets "v"/"kv", NULL = off
    nsa: Mapped[str | None] = mapped_column(String(16))  # NSA's combine mode, NULL = dense
    qk_norm: Mapped[bool | None] = mapped_column(Boolean)
    clip_residual: Mapped[float | None] = mapped_column(Float)
    steps: Mapped[int | None] = mapped_column(Integer)
    # Seed replicates share group_key; runs differing only in train.lr share lr_group_key.
    group_key: Mapped[str | None] = mapped_column(String(16), index=True)
    lr_group_key: Mapped[str | None] = mapped_column(String(16))
    params_total: Mapped[int | None] = mapped_column(BigInteger)
    params_gates: Mapped[int | None] = mapped_column(BigInteger)
    created: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The driver that queued/holds the run and until when (renewed each heartbeat interval):
    # a pending run whose lease ran out belongs to a dead driver (migration 0002_claims).
    owner: Mapped[str | None] = mapped_column(String(255))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    __table_args__ = (Index("ix_runs_sweep_variant", "sweep_id", "variant"),)


class Attempt(Base):
    __tablename__ = "attempts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.RUNNING.value)
    started: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended: Mapped[datetime | None] = mapped_column(UTCDateTime)
    heartbeat: Mapped[datetime | None] = mapped_column(UTCDateTime)
    host: Mapped[str] = mapped_column(String(255), default="")
    pid: Mapped[int | None] = mapped_column(Integer)
    trial_id: Mapped[str | None] = mapped_column(String(255))
    error: Mapped[str | None] = mapped_column(Text)
    traceback: Mapped[str | None] = mapped_column(Text)
    # Who claimed the run ("submit 3f2a on host x"), what ended it (states.FaultClass), and the
    # heartbeat interval it promised (staleness = states.stale_after_s of it). 0002_claims.
    owner: Mapped[str | None] = mapped_column(String(255))
    fault: Mapped[str | None] = mapped_column(String(32))
    heartbeat_s: Mapped[float | None] = mapped_column(Float)
    __table_args__ = (UniqueConstraint("run_id", "number", name="uq_attempts_run_number"),
                      Index("ix_attempts_status", "status"))


class Metric(Base):
    """One point. (run_id, name, step) is the primary key: the index AND the uniqueness that
    makes a retried attempt's re-logged step replace the old point instead of duplicating it."""

    __tablename__ = "metrics"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("attempts.id", ondelete="SET NULL"))
    value: Mapped[float | None] = mapped_column(Float)
    __table_args__ = ({"sqlite_with_rowid": False},)


class Summary(Base):
    __tablename__ = "summaries"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"),
                                        primary_key=True)
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("attempts.id", ondelete="SET NULL"))
    value: Mapped[float | None] = mapped_column(Float)
    __table_args__ = (Index("ix_summaries_name", "name"),)


class Artifact(Base):
    __tablename__ = "artifacts"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    attempt_id: Mapped[int | None] = mapped_column(
        ForeignKey("attempts.id", ondelete="SET NULL"))
    kind: Mapped[str] = mapped_column(String(64))
    path: Mapped[str | None] = mapped_column(Text)
    data: Mapped[Any | None] = mapped_column(JSON)
    created: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Provenance(Base):
    """What produced an attempt (contract/provenance.py names the columns): its code version,
    package versions, accelerator, CPU and DeepSpeed config. One row per attempt, written by
    the trainer's reporter at the attempt's start (migration 0006_provenance)."""

    __tablename__ = "provenance"
    attempt_id: Mapped[int] = mapped_column(ForeignKey("attempts.id", ondelete="CASCADE"),
                                            primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    source: Mapped[str] = mapped_column(String(16))
    git_commit: Mapped[str | None] = mapped_column(String(64))
    dirty: Mapped[bool | None] = mapped_column(Boolean)
    diff_sha256: Mapped[str | None] = mapped_column(String(64))
    code_version: Mapped[str] = mapped_column(String(128), index=True)
    python: Mapped[str | None] = mapped_column(String(64))
    gatesweep: Mapped[str | None] = mapped_column(String(64))
    torch: Mapped[str | None] = mapped_column(String(64))
    deepspeed: Mapped[str | None] = mapped_column(String(64))
    ray: Mapped[str | None] = mapped_column(String(64))
    polars: Mapped[str | None] = mapped_column(String(64))
    sqlalchemy: Mapped[str | None] = mapped_column(String(64))
    accelerator: Mapped[str] = mapped_column(String(32))
    device_model: Mapped[str | None] = mapped_column(String(255))
    device_count: Mapped[int] = mapped_column(Integer, default=0)
    cpu_model: Mapped[str | None] = mapped_column(String(255))
    cpu_threads: Mapped[int | None] = mapped_column(Integer)
    world_size: Mapped[int] = mapped_column(Integer, default=1)
    deepspeed_config: Mapped[Any | None] = mapped_column(JSON)
    recorded: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class DecideRuleChange(Base):
    """A ``decide:`` rule changed after its sweep had runs (``submit --change-rule``): the rule
    before and after, and the seeds and runs the sweep had then (migration 0007)."""

    __tablename__ = "decide_rule_changes"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)  # the rule version this change starts (2, 3..)
    changed: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    seeds: Mapped[int] = mapped_column(Integer)  # the most seeds any row had registered then
    runs: Mapped[int] = mapped_column(Integer)
    before: Mapped[Any] = mapped_column(JSON)
    after: Mapped[Any] = mapped_column(JSON)
    __table_args__ = (UniqueConstraint("sweep_id", "version",
                                       name="uq_decide_rule_changes_version"),)


class DecidePair(Base):
    """A complete (variant seed, baseline seed) pair of a decide row and the look that first
    read it: the order its confidence sequence reads pairs in (append-only)."""

    __tablename__ = "decide_pairs"
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"),
                                          primary_key=True)
    group_key: Mapped[str] = mapped_column(String(32), primary_key=True)
    seed: Mapped[int] = mapped_column(Integer, primary_key=True)
    look: Mapped[int] = mapped_column(Integer)


class DecideLook(Base):
    """One look's reading of one decide row: pairs, incomplete pairs, interval and verdict
    under the rule version then in force."""

    __tablename__ = "decide_looks"
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"),
                                          primary_key=True)
    look: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_key: Mapped[str] = mapped_column(String(32), primary_key=True)
    rule_version: Mapped[int] = mapped_column(Integer)
    n: Mapped[int] = mapped_column(Integer)
    incomplete: Mapped[int] = mapped_column(Integer)
    mean: Mapped[float | None] = mapped_column(Float)
    low: Mapped[float | None] = mapped_column(Float)
    high: Mapped[float | None] = mapped_column(Float)
    verdict: Mapped[str] = mapped_column(String(32))
    recorded: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
