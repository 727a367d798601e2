"""Schema creation and upgrades through Alembic, configured in code (no alembic.ini).

``upgrade(url)`` is what ``orchestrator db upgrade`` calls; ``results_db.open`` calls it too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

from results_db.dberrors import DBUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parents[1] / "migrations"
_REV = re.compile(r'^(down_revision|revision)\s*=\s*["\']?([\w.-]+|None)["\']?', re.M)


def _scan() -> dict[str, str]:
    """revision -> down_revision of every file in migrations/versions, read from their
    ``revision`` / ``down_revision`` lines without importing Alembic (a test checks the head
    against Alembic's). A new revision file is picked up by itself: no constant to bump."""
    out: dict[str, str] = {}
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict(_REV.findall(path.read_text(encoding="utf-8")))
        if "revision" in found:
            out[found["revision"]] = found.get("down_revision", "None")
    return out


REVISIONS = _scan()  # every revision this gatesweep knows (results_db/schema/ownership.py asks)
_HEADS = sorted(set(REVISIONS) - set(REVISIONS.values()))
# open() skips Alembic entirely when the DB is already at head, so trial processes open fast.
HEAD_REVISION = _HEADS[0] if len(_HEADS) == 1 else ""  # "" (several heads): let Alembic decide


def older_revisions(head: str) -> set[str]:
    """The revisions before ``head``, following down_revision."""
    older: set[str] = set()
    cur = REVISIONS.get(head)
    while cur and cur != "None" and cur not in older:
        older.add(cur)
        cur = REVISIONS.get(cur)
    return older


def alembic_config(connection: object) -> Config:
    from alembic.config import Config  # lazy: alembic costs ~0.1 s to import

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["connection"] = connection
    return cfg


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def ensure_head(engine: Engine, check: Callable[[], None]) -> None:
    """Upgrade to head unless the DB is already there (one cheap SELECT in that case);
    ``check`` runs first (engine.check_writable: a DB that is not ours is refused)."""
    try:
        if HEAD_REVISION and current_revision(engine) == HEAD_REVISION:
            return
    except DBUnavailable:  # unreachable or not a DB: asking again would only wait again
        raise
    except Exception:  # noqa: BLE001 -- e.g. a half-created DB: let Alembic decide
        pass
    check()
    upgrade_engine(engine)


def upgrade_engine(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    with engine.connect() as conn:
        command.upgrade(alembic_config(conn), revision)
        conn.commit()
