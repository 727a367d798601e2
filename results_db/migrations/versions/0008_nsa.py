"""The run dimension ``nsa``: Native Sparse Attention's branch combination, NULL = dense.

Revision ID: 0008_nsa
Revises: 0007_decide_records
Create Date: 2026-12-08

``runs.nsa`` holds ``model.nsa.combine`` (gated | learned | equal) of a run with Native Sparse
Attention (contract/dimensions.py), so SQL and the frames group by it. Every run stored before
this revision had dense attention: its NULL says exactly that, so nothing is backfilled. Frozen
like 0001: the column is spelled out here, not read from results_db.schema.tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_nsa"
down_revision = "0007_decide_records"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("nsa", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "nsa")
