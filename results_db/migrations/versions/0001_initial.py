"""Initial schema: sweeps, runs (+ dimension columns), attempts, metrics, summaries, artifacts.

Revision ID: 0001
Revises:
Create Date: 2026-11-29

Frozen: this file spells out its tables instead of reading results_db.schema.tables, so later
changes to the ORM need a new revision and never alter what 0001 creates.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from results_db.migrations.views import create_views, drop_views

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=False)  # naive UTC (results_db.schema.tables.UTCDateTime)


def _runs_columns() -> list[sa.Column]:
    s, i, f, b = sa.String, sa.Integer, sa.Float, sa.Boolean
    dims = [("gate_position", s(32)), ("gate_granularity", s(64)), ("gate_sharing", s(64)),
            ("gate_combine", s(64)), ("gate_activation", s(64)), ("gate_input_dependent", b()),
            ("nonlinearity", s(32)), ("lr", f()), ("n_layer", i()), ("d_model", i()),
            ("n_head", i()), ("n_kv_head", i()), ("moe_experts", i()), ("norm_style", s(32)),
            ("switch_head", s(8)), ("qk_norm", b()), ("clip_residual", f()), ("steps", i()),
            ("group_key", s(16)), ("lr_group_key", s(16)), ("params_total", sa.BigInteger()),
            ("params_gates", sa.BigInteger())]
    return [
        sa.Column("id", i(), primary_key=True),
        sa.Column("name", s(300), nullable=False),
        sa.Column("sweep_id", i(), sa.ForeignKey("sweeps.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("fingerprint", s(64), nullable=False, unique=True),
        sa.Column("variant", s(200), nullable=False),
        sa.Column("seed", i(), nullable=False),
        sa.Column("status", s(16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("n_gates", i(), nullable=False),
        *[sa.Column(name, typ, nullable=True) for name, typ in dims],
        sa.Column("created", TS, nullable=False),
        sa.Column("updated", TS, nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created", TS, nullable=False),
    )
    op.create_table("runs", *_runs_columns())
    op.create_index("ix_runs_name", "runs", ["name"])
    op.create_index("ix_runs_sweep_id", "runs", ["sweep_id"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_group_key", "runs", ["group_key"])
    op.create_index("ix_runs_sweep_variant", "runs", ["sweep_id", "variant"])
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started", TS, nullable=False),
        sa.Column("ended", TS), sa.Column("heartbeat", TS),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer()), sa.Column("trial_id", sa.String(255)),
        sa.Column("error", sa.Text()), sa.Column("traceback", sa.Text()),
        sa.UniqueConstraint("run_id", "number", name="uq_attempts_run_number"),
    )
    _value_tables()
    create_views(op.get_bind().dialect.name)


def _value_tables() -> None:
    run_fk = sa.ForeignKey("runs.id", ondelete="CASCADE")
    op.create_table(
        "metrics",
        sa.Column("run_id", sa.Integer(), run_fk, primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("step", sa.Integer(), primary_key=True),
        sa.Column("attempt_id", sa.Integer(),
                  sa.ForeignKey("attempts.id", ondelete="SET NULL")),
        sa.Column("value", sa.Float()),
        sqlite_with_rowid=False,  # the (run_id, name, step) key IS the table: half the size
    )
    op.create_table(
        "summaries",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("attempt_id", sa.Integer(),
                  sa.ForeignKey("attempts.id", ondelete="SET NULL")),
        sa.Column("value", sa.Float()),
    )
    op.create_index("ix_summaries_name", "summaries", ["name"])
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("attempt_id", sa.Integer(),
                  sa.ForeignKey("attempts.id", ondelete="SET NULL")),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("path", sa.Text()),
        sa.Column("data", sa.JSON()),
        sa.Column("created", TS, nullable=False),
    )
    op.create_index("ix_artifacts_run_id", "artifacts", ["run_id"])


def downgrade() -> None:
    drop_views()
    for table in ("artifacts", "summaries", "metrics", "attempts", "runs", "sweeps"):
        op.drop_table(table)
