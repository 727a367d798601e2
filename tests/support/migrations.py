"""Alembic from the test side: the head Alembic itself finds (to check the product's own scan of
migrations/versions against) and downgrades (to build DBs of an older schema)."""

from __future__ import annotations

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from results_db.schema.migrate import MIGRATIONS_DIR, alembic_config


def head_revision() -> str:
    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() or ""


def downgrade_engine(engine: Engine, revision: str) -> None:
    with engine.connect() as conn:
        command.downgrade(alembic_config(conn), revision)
        conn.commit()
