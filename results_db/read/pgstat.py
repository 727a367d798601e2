"""Who holds connections to a PostgreSQL results DB (pg_stat_activity), for the connection
bound of docs/cluster.md: benchmarks/cluster_scale.py samples it during a sweep and the tests
check a process never holds more than its pools allow.

Every gatesweep engine names its connections ``gatesweep pid=<pid>`` (engine.APP_NAME), so the
count per process needs no guessing from client ports.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from results_db.engine import APP_NAME, _pg_connect_args, is_sqlite, resolve_url

_PID = re.compile(rf"^{APP_NAME} pid=([0-9]+)$")  # ASCII digits (contract/ids.py)


@dataclass(frozen=True)
class Connections:
    total: int  # every client backend on the server (ours, the monitor's excluded)
    by_pid: dict[int, int]  # gatesweep process id -> connections it holds
    other: int  # client backends that are not gatesweep's (psql, another tool)
    max_connections: int


def connections(url: str) -> Connections:
    """One snapshot of the server's client connections (the query's own is not counted)."""
    u = resolve_url(url)
    if is_sqlite(u):
        raise ValueError(f"connections: {u} is SQLite; only a PostgreSQL server has connections")
    eng = create_engine(u, poolclass=NullPool, connect_args=_pg_connect_args(
        u, application_name="gatesweep-monitor"))
    try:
        with eng.connect() as conn:
            rows = conn.execute(text(
                "SELECT application_name, count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() "
                "GROUP BY application_name")).all()
            limit = int(conn.execute(text("SHOW max_connections")).scalar_one())
    finally:
        eng.dispose()
    by_pid: dict[int, int] = {}
    other = 0
    for name, n in rows:
        m = _PID.match(name or "")
        if m:
            by_pid[int(m.group(1))] = by_pid.get(int(m.group(1)), 0) + int(n)
        else:
            other += int(n)
    return Connections(sum(by_pid.values()) + other, by_pid, other, limit)
