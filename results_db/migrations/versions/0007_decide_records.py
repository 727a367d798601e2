"""The records of an adaptive (``decide:``) sweep: rule changes, pairs and looks.

Revision ID: 0007_decide_records
Revises: 0006_provenance
Create Date: 2026-12-07

- ``decide_rule_changes``: one row each time a sweep's ``decide:`` rule was changed after it
  had runs (``submit --change-rule``): when, the seeds and runs it had then, the rule before
  and after (JSON). A verdict is reported with the rule changes behind it.
- ``decide_pairs``: each complete (variant seed, baseline seed) pair of a row, with the look
  at which it was first read: the order the confidence sequence reads pairs in, append-only,
  so a pair completed later (a baseline rerun) never re-orders the earlier looks.
- ``decide_looks``: each look's reading of each row (pairs, incomplete pairs, interval,
  verdict, rule version): "a verdict never flips back" is a property of these rows.
Frozen like 0001: the columns are spelled out here, not read from results_db.schema.tables.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_decide_records"
down_revision = "0006_provenance"
branch_labels = None
depends_on = None


def _sweep() -> sa.Column:
    return sa.Column("sweep_id", sa.Integer(), sa.ForeignKey("sweeps.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "decide_rule_changes",
        sa.Column("id", sa.Integer(), primary_key=True),
        _sweep(),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("changed", sa.DateTime(timezone=False), nullable=False),
        sa.Column("seeds", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("before", sa.JSON(), nullable=False),
        sa.Column("after", sa.JSON(), nullable=False),
        sa.UniqueConstraint("sweep_id", "version", name="uq_decide_rule_changes_version"),
    )
    op.create_table(
        "decide_pairs",
        _sweep(),
        sa.Column("group_key", sa.String(32), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("look", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("sweep_id", "group_key", "seed"),
    )
    op.create_table(
        "decide_looks",
        _sweep(),
        sa.Column("look", sa.Integer(), nullable=False),
        sa.Column("group_key", sa.String(32), nullable=False),
        sa.Column("rule_version", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("incomplete", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Float()),
        sa.Column("low", sa.Float()),
        sa.Column("high", sa.Float()),
        sa.Column("verdict", sa.String(32), nullable=False),
        sa.Column("recorded", sa.DateTime(timezone=False), nullable=False),
        sa.PrimaryKeyConstraint("sweep_id", "look", "group_key"),
    )


def downgrade() -> None:
    for table in ("decide_looks", "decide_pairs", "decide_rule_changes"):
        op.drop_table(table)
