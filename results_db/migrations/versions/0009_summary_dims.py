"""The ``run_summary`` view carries every run dimension.

Revision ID: 0009_summary_dims
Revises: 0008_nsa
Create Date: 2026-12-08

0001's view listed a subset of the dimensions; ``nsa`` (0008) and ``clip_residual``,
``qk_norm`` and ``steps`` were columns of ``runs`` that SQL over ``run_summary`` could not
group by. Both views are dropped (``leaderboard`` reads ``run_summary``; PostgreSQL refuses to
drop a view another one reads) and created again, ``leaderboard`` from 0001's unchanged SQL.
Frozen like 0001: the columns are spelled out here, not read from contract/dimensions.py
(tests/results_db/test_migration_views.py checks the head revision's view lists them all).
"""

from __future__ import annotations

from alembic import op

from results_db.migrations.views import (
    RUN_DIMS,
    create_views,
    drop_views,
    leaderboard_sql,
    run_summary_sql,
)

revision = "0009_summary_dims"
down_revision = "0008_nsa"
branch_labels = None
depends_on = None

ADDED = ("nsa", "clip_residual", "qk_norm", "steps")


def upgrade() -> None:
    drop_views()
    op.execute(run_summary_sql((*RUN_DIMS, *ADDED)))
    op.execute(leaderboard_sql(op.get_bind().dialect.name))


def downgrade() -> None:
    drop_views()
    create_views(op.get_bind().dialect.name)
