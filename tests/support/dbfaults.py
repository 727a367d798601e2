"""A full or read-only disk under the results DB, injected from outside the product.

``db_fault(flag)``: while it is active, every SQLAlchemy transaction that BEGINs in this process
on a SQLite engine -- the results DB's writer included -- runs with ``PRAGMA max_page_count``
clamped to the DB's current size whenever the file ``flag`` exists, so a write that needs a
new page fails with SQLITE_FULL exactly as on a full disk (free space inside existing pages is
still used, as on a real disk). A flag that says ``readonly`` makes every write fail instead
(``PRAGMA query_only``: SQLITE_READONLY, as on a file system remounted read-only). Removing the
file gives the space back. ``max_page_count`` is per connection, which is why the clamp rides
on the ``begin`` event of every engine (an event listener on the Engine class, added by the
test and removed after it) instead of a hook in results_db's write path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event


def _clamp(flag: Path, conn: Any) -> None:
    if conn.engine.dialect.name != "sqlite":
        return
    info = conn.info
    if "max_pages" not in info:  # this connection's own default, to restore it later
        info["max_pages"] = conn.exec_driver_sql("PRAGMA max_page_count").scalar()
    try:
        mode: str | None = flag.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        mode = None
    # a value below the current size clamps to it: the file may not grow any more
    pages = 1 if mode is not None else info["max_pages"]
    conn.exec_driver_sql(f"PRAGMA max_page_count = {int(pages)}")
    conn.exec_driver_sql(f"PRAGMA query_only = {1 if mode == 'readonly' else 0}")


@contextmanager
def db_fault(flag: Path) -> Iterator[None]:
    """Clamp every SQLite transaction of this process while ``flag`` exists (module doc)."""
    def on_begin(conn: Any) -> None:
        _clamp(flag, conn)

    event.listen(Engine, "begin", on_begin)
    try:
        yield
    finally:
        event.remove(Engine, "begin", on_begin)
