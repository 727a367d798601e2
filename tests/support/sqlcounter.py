"""Transactions and statements counted on every SQLAlchemy engine of this process.

For tests and benchmarks (benchmarks/trial_overhead.py): how many round trips a code path
costs. The pool's pings (results_db/engine.py) run on the raw driver connection and are not
counted.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


class SQLCounter:
    """``tx``: transactions begun, ``stmts``: statements executed, since this was made."""

    def __init__(self) -> None:
        self.tx = self.stmts = 0
        event.listen(Engine, "begin", self._begin)
        event.listen(Engine, "before_cursor_execute", self._stmt)

    def close(self) -> None:
        event.remove(Engine, "begin", self._begin)
        event.remove(Engine, "before_cursor_execute", self._stmt)

    def _begin(self, *_: Any) -> None:
        self.tx += 1

    def _stmt(self, *_: Any) -> None:
        self.stmts += 1
