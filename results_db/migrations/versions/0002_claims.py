"""Claims and fault classes on attempts.

Revision ID: 0002_claims
Revises: 0001
Create Date: 2026-11-30

``attempts.owner``: the lease holder that claimed the run ("submit 3f2a on host x"), shown to a
driver that loses the claim race. ``attempts.fault``: what ended a failed attempt
(contract.states.FaultClass: worker_died, node_lost, oom, preempted, code_error, ...).
``attempts.heartbeat_s``: the interval the attempt promised to heartbeat at; staleness is a
multiple of it (contract.states.stale_after_s), so a silent death is seen in seconds.
``runs.owner`` / ``runs.lease_until``: the driver that queued or holds the run and until when
its lease runs (renewed every heartbeat interval), so a never-started run of a dead driver is
told apart from one a live driver will still start.

Frozen like 0001: it spells out its columns instead of reading results_db.schema.tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_claims"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("owner", sa.String(255), nullable=True))
    op.add_column("attempts", sa.Column("fault", sa.String(32), nullable=True))
    op.add_column("attempts", sa.Column("heartbeat_s", sa.Float(), nullable=True))
    op.create_index("ix_attempts_status", "attempts", ["status"])
    op.add_column("runs", sa.Column("owner", sa.String(255), nullable=True))
    op.add_column("runs", sa.Column("lease_until", sa.DateTime(timezone=False), nullable=True))


def downgrade() -> None:
    for col in ("lease_until", "owner"):
        op.drop_column("runs", col)
    op.drop_index("ix_attempts_status", table_name="attempts")
    for col in ("heartbeat_s", "fault", "owner"):  # SQLite >= 3.35 drops columns natively
        op.drop_column("attempts", col)
