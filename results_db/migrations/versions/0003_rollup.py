"""The metric rollup table (fast downsampled curves), backfilled from ``metrics``.

Revision ID: 0003_rollup
Revises: 0002_claims
Create Date: 2026-12-01

``metric_rollup``: per (run, name, 256-step block) the point count, first step, arg-min,
arg-max, last point and first NULL step (results_db/write/rollup.py keeps it at ingest;
results_db/read/downsample.py reads it). Frozen like 0001: the columns, the block size and the
backfill SQL are spelled out here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_rollup"
down_revision = "0002_claims"
branch_labels = None
depends_on = None

BLOCK = 256
T = "metric_rollup"
# The block's primary-key range in ``metrics`` (<= BLOCK points: the sorts below are tiny).
_RANGE = (f"m.run_id = {T}.run_id AND m.name = {T}.name "
          f"AND m.step BETWEEN {T}.bucket * {BLOCK} AND {T}.bucket * {BLOCK} + {BLOCK - 1}")
_AT = f"m.run_id = {T}.run_id AND m.name = {T}.name AND m.step = {T}"
BACKFILL: tuple[str, ...] = (
    f"""INSERT INTO {T} (run_id, name, bucket, n, first_step, last_step, nan_step)
    SELECT run_id, name, step / {BLOCK}, COUNT(*), MIN(step), MAX(step),
      MIN(CASE WHEN value IS NULL THEN step END)
    FROM metrics GROUP BY run_id, name, step / {BLOCK}""",
    f"""UPDATE {T} SET
      min_step = (SELECT m.step FROM metrics m WHERE {_RANGE} AND m.value IS NOT NULL
                  ORDER BY m.value, m.step LIMIT 1),
      max_step = (SELECT m.step FROM metrics m WHERE {_RANGE} AND m.value IS NOT NULL
                  ORDER BY m.value DESC, m.step LIMIT 1),
      last_value = (SELECT m.value FROM metrics m WHERE {_AT}.last_step)""",
    f"""UPDATE {T} SET
      min_value = (SELECT m.value FROM metrics m WHERE {_AT}.min_step),
      max_value = (SELECT m.value FROM metrics m WHERE {_AT}.max_step)""",
)


def upgrade() -> None:
    i, f = sa.Integer, sa.Float
    op.create_table(
        T,
        sa.Column("run_id", i(), sa.ForeignKey("runs.id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("bucket", i(), primary_key=True),
        sa.Column("n", i(), nullable=False),
        sa.Column("first_step", i(), nullable=False),
        sa.Column("min_step", i()), sa.Column("min_value", f()),
        sa.Column("max_step", i()), sa.Column("max_value", f()),
        sa.Column("last_step", i(), nullable=False), sa.Column("last_value", f()),
        sa.Column("nan_step", i()),
        sqlite_with_rowid=False,  # the (run_id, name, bucket) key IS the table
    )
    for sql in BACKFILL:
        op.execute(sql)


def downgrade() -> None:
    op.drop_table(T)
