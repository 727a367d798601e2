"""``train.fail_at_step`` leaves the RunSpec (no test hook in the product).

Revision ID: 0005_retire_fail_at_step
Revises: 0004_group_keys
Create Date: 2026-12-02

The field was a test-only fault hook (raise before update N). Tests inject that fault from
outside now (tests/support/stepfault.py), so RunSpec refuses the key, and a stored config that
still has it could not be read back as a RunSpec (rerun, evaluate, the analysis API). This
takes the key out of every stored config. Fingerprints do not change: the identity rule puts the
retired field back at its null default (contract.identity.RETIRED), so runs and the markers of
their checkpoints keep their fingerprints. A run that had a fault injected (a non-null value)
keeps its stored fingerprint; its seed-group keys are recomputed from the config it has now.
The fault class ``injected`` goes with it: such attempts were RuntimeErrors, which is what
any other RuntimeError is classified as (``code_error``).
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

from contract.identity import group_keys

revision = "0005_retire_fail_at_step"
down_revision = "0004_group_keys"
branch_labels = None
depends_on = None

_FIELD = "fail_at_step"  # under train
_BATCH = 1000


def _doc(config: Any) -> Any:
    return json.loads(config) if isinstance(config, (str, bytes)) else config


def _in_batches(bind: sa.Connection, stmt: sa.TextClause, params: list[dict[str, Any]]) -> None:
    for i in range(0, len(params), _BATCH):
        bind.execute(stmt, params[i:i + _BATCH])


def upgrade() -> None:
    bind = op.get_bind()
    # LIKE narrows the scan to rows that can hold the key (JSON is text in SQLite, json in PG).
    rows = bind.execute(sa.text("SELECT id, config FROM runs WHERE CAST(config AS TEXT) "
                                "LIKE :pat ORDER BY id"), {"pat": f"%{_FIELD}%"}).all()
    update = sa.text("UPDATE runs SET config = :c, group_key = :g, lr_group_key = :lg "
                     "WHERE id = :id").bindparams(sa.bindparam("c", type_=sa.JSON()))
    params = []
    for run_id, config in rows:
        doc = _doc(config)
        train = doc.get("train") if isinstance(doc, dict) else None
        if not isinstance(train, dict) or _FIELD not in train:
            continue
        train.pop(_FIELD)
        group, lr_group = group_keys(doc)
        params.append({"id": run_id, "c": doc, "g": group, "lg": lr_group})
    _in_batches(bind, update, params)
    bind.execute(sa.text("UPDATE attempts SET fault = 'code_error' WHERE fault = 'injected'"))


def downgrade() -> None:
    """Puts the key back at null (its value for every run but fault-injected test runs);
    ``injected`` faults stay ``code_error``."""
    bind = op.get_bind()
    rows = bind.execute(sa.text("SELECT id, config FROM runs ORDER BY id")).all()
    update = sa.text("UPDATE runs SET config = :c WHERE id = :id").bindparams(
        sa.bindparam("c", type_=sa.JSON()))
    params = []
    for run_id, config in rows:
        doc = _doc(config)
        if isinstance(doc, dict) and isinstance(doc.get("train"), dict):
            doc["train"].setdefault(_FIELD, None)
            params.append({"id": run_id, "c": doc})
    _in_batches(bind, update, params)
