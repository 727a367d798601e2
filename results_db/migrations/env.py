"""Alembic environment, driven from code (results_db.schema.migrate) -- there is no alembic.ini.

The caller passes an open SQLAlchemy connection in ``config.attributes["connection"]``.
Migrations run in one transaction (SQLite and PostgreSQL both have transactional DDL); on
PostgreSQL an advisory lock serialises processes that open a fresh DB at the same moment
(on SQLite, the writer's BEGIN IMMEDIATE does that).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from results_db.schema.tables import Base

MIGRATION_LOCK_ID = 74_210_311  # arbitrary, constant: pg_advisory_xact_lock key


def run_migrations_online() -> None:
    connection = context.config.attributes["connection"]
    context.configure(connection=connection, target_metadata=Base.metadata,
                      transactional_ddl=True, render_as_batch=True)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            connection.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})"))
        context.run_migrations()


if context.is_offline_mode():
    raise RuntimeError("results_db migrations run online only (results_db.upgrade(url))")
run_migrations_online()
