"""Schema creation and upgrades through Alembic, configured in code (no alembic.ini).

``upgrade(url)`` is what ``orchestrator db upgrade`` calls; ``results_db.open`` calls it too.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, inspect, text

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# The newest revision in migrations/versions (a test checks it against Alembic's head):
# open() skips Alembic entirely when the DB is already there, so trial processes open fast.
HEAD_REVISION = "0001"


def _alembic_config(connection: object) -> "object":
    from alembic.config import Config  # lazy: alembic costs ~0.1 s to import

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() or ""


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def ensure_head(engine: Engine) -> None:
    """Upgrade to head unless the DB is already there (one cheap SELECT in that case)."""
    try:
        if current_revision(engine) == HEAD_REVISION:
            return
    except Exception:  # noqa: BLE001 -- e.g. a half-created DB: let Alembic decide
        pass
    upgrade_engine(engine)


def upgrade_engine(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    with engine.connect() as conn:
        command.upgrade(_alembic_config(conn), revision)
        conn.commit()


def downgrade_engine(engine: Engine, revision: str) -> None:
    from alembic import command

    with engine.connect() as conn:
        command.downgrade(_alembic_config(conn), revision)
        conn.commit()
