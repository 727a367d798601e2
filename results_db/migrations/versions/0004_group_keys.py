"""Seed-group keys from the one identity rule: runs that differ in workers split.

Revision ID: 0004_group_keys
Revises: 0003_rollup
Create Date: 2026-12-01

``runs.group_key`` / ``runs.lr_group_key`` used to drop the whole ``resources`` block, although
the fingerprint keeps ``resources.workers`` (it multiplies the global batch): runs that differed
only in their worker count were pooled as seeds of one group. Both keys now come from the
fingerprint's canonical document (contract/identity.py); this recomputes them for the stored
runs, so old and newly registered runs of a sweep group alike. Not frozen on purpose: the keys
of existing rows must be the keys the current rule gives new rows.
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from contract.identity import group_keys

revision = "0004_group_keys"
down_revision = "0003_rollup"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, config FROM runs ORDER BY id")).all()
    update = sa.text("UPDATE runs SET group_key = :g, lr_group_key = :lg WHERE id = :id")
    params = []
    for run_id, config in rows:
        doc = json.loads(config) if isinstance(config, (str, bytes)) else config
        group, lr_group = group_keys(doc if isinstance(doc, dict) else {})
        params.append({"id": run_id, "g": group, "lg": lr_group})
    for i in range(0, len(params), _BATCH):
        bind.execute(update, params[i:i + _BATCH])


def downgrade() -> None:
    """The old keys are not recoverable from the rule alone; they are only a cache of it."""
