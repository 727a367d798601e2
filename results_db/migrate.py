"""Schema creation and upgrades through Alembic, configured in code (no alembic.ini).

``upgrade(url)`` is what ``orchestrator db upgrade`` calls; ``results_db.open`` calls it too.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, inspect, text

from results_db.dberrors import DBUnavailable

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
_REV = re.compile(r'^(down_revision|revision)\s*=\s*["\']?([\w.-]+|None)["\']?', re.M)


def _scan_head() -> str:
    """The newest revision in migrations/versions, read from the files' ``revision`` /
    ``down_revision`` lines without importing Alembic (a test checks it against Alembic's
    head). A new revision file is picked up by itself: no constant to bump."""
    revs: set[str] = set()
    downs: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict(_REV.findall(path.read_text(encoding="utf-8")))
        if "revision" in found:
            revs.add(found["revision"])
            downs.add(found.get("down_revision", "None"))
    heads = sorted(revs - downs)
    return heads[0] if len(heads) == 1 else ""  # "" (several heads): let Alembic decide


# open() skips Alembic entirely when the DB is already at head, so trial processes open fast.
HEAD_REVISION = _scan_head()


def refuse_foreign_sqlite(path: Path) -> None:
    """Raise DBUnavailable when the SQLite file at ``path`` holds another tool's tables and no
    gatesweep schema: a writer (``db upgrade``, ``submit``) would switch it to WAL and add
    ten tables to it. Checked read-only (``mode=ro``), before any writer connects."""
    import sqlite3
    from urllib.parse import quote

    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{quote(str(path))}?mode=ro",
                                                uri=True)) as conn:
            names = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                "'sqlite_%' ORDER BY name")]
    except sqlite3.Error:
        return  # not a database at all: the writer's own error names it
    if names and "alembic_version" not in names:
        shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise DBUnavailable(f"results DB {path} is another tool's SQLite database (tables "
                            f"{shown}; no gatesweep schema); refusing to add the results "
                            "schema to it: choose a new file for --db")


def _alembic_config(connection: object) -> Config:
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
        if HEAD_REVISION and current_revision(engine) == HEAD_REVISION:
            return
    except DBUnavailable:  # unreachable or not a DB: asking again would only wait again
        raise
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
