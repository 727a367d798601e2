"""Provenance per attempt: the code, packages and machine that produced it.

Revision ID: 0006_provenance
Revises: 0005_retire_fail_at_step
Create Date: 2026-12-03

``provenance``: one row per attempt (the trainer records it at the attempt's start): the git
commit, whether the tree was dirty and the sha256 of its diff (or ``no git`` and the installed
version), the code version key results compare on, the versions of python, gatesweep, torch,
deepspeed, ray, polars and sqlalchemy, the accelerator kind / model / count, the CPU model and
thread count, the number of ranks and the DeepSpeed config used. Attempts from before this
revision have no row (their provenance was never recorded). Frozen like 0001: the columns are
spelled out here instead of read from results_db.schema.tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_provenance"
down_revision = "0005_retire_fail_at_step"
branch_labels = None
depends_on = None

T = "provenance"


def upgrade() -> None:
    s = sa.String
    op.create_table(
        T,
        sa.Column("attempt_id", sa.Integer(), sa.ForeignKey("attempts.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("source", s(16), nullable=False),
        sa.Column("git_commit", s(64)),
        sa.Column("dirty", sa.Boolean()),
        sa.Column("diff_sha256", s(64)),
        sa.Column("code_version", s(128), nullable=False),
        *(sa.Column(name, s(64)) for name in ("python", "gatesweep", "torch", "deepspeed", "ray",
                                              "polars", "sqlalchemy")),
        sa.Column("accelerator", s(32), nullable=False),
        sa.Column("device_model", s(255)),
        sa.Column("device_count", sa.Integer(), nullable=False),
        sa.Column("cpu_model", s(255)),
        sa.Column("cpu_threads", sa.Integer()),
        sa.Column("world_size", sa.Integer(), nullable=False),
        sa.Column("deepspeed_config", sa.JSON()),
        sa.Column("recorded", sa.DateTime(timezone=False), nullable=False),
    )
    op.create_index("ix_provenance_run_id", T, ["run_id"])
    op.create_index("ix_provenance_code_version", T, ["code_version"])


def downgrade() -> None:
    op.drop_index("ix_provenance_code_version", table_name=T)
    op.drop_index("ix_provenance_run_id", table_name=T)
    op.drop_table(T)
