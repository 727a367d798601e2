"""An attempt that has been silent for a while, without waiting that long.

Staleness (contract.states.stale_after_s, at least 2 s) is judged from the attempt's recorded
start and last heartbeat against the clock, so moving both back by ``seconds`` leaves the row a
sleep of ``seconds`` would leave: the tests of takeovers, reconciles and ETAs need not sleep
through the window. Written through the ORM's own column types (SQLite text, PostgreSQL
timestamptz alike).
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, update

from results_db import ResultsDB
from results_db.schema.tables import Attempt


def silence(db: ResultsDB, attempt_id: int, seconds: float) -> None:
    """As if attempt ``attempt_id`` had sent nothing for ``seconds`` more."""
    back = timedelta(seconds=seconds)
    with db.engine.begin() as c:
        row = c.execute(select(Attempt.started, Attempt.heartbeat)
                        .where(Attempt.id == attempt_id)).one()
        c.execute(update(Attempt).where(Attempt.id == attempt_id).values(
            started=row.started - back,
            heartbeat=None if row.heartbeat is None else row.heartbeat - back))
