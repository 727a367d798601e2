"""Pooled PostgreSQL connections are pinged before use once idle (results_db.engine).

A ping before every checkout was a sixth of a short trial's statements; a connection used a
moment ago goes out unchecked. One that sat idle across a server restart must still be
replaced, not handed out dead.
"""

from __future__ import annotations

import time

import pytest

import results_db
from results_db import engine
from tests.support.pgtemp import start_pg_server, stop_pg_server
from tests.support.synthdb import one_run

pytestmark = pytest.mark.postgres


def test_a_connection_idle_across_a_server_restart_is_replaced_not_handed_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "PG_PING_IDLE_S", 0.3)  # the product waits 1 s; read at open
    server = start_pg_server()
    try:
        server.admin("CREATE DATABASE ping")
        db = results_db.open(server.url("ping"))
        rid = one_run(db)
        assert db.run(rid) is not None  # a pooled connection now exists
        log = str(server.root / "server.log")  # the server must not hold our pipes
        assert server.pg_ctl("-l", log, "-m", "fast", "-w", "restart").returncode == 0
        time.sleep(engine.PG_PING_IDLE_S + 0.2)
        row = db.run(rid)  # the dead connection fails its ping; a new one answers
        assert row is not None and row.status == "pending"
    finally:
        stop_pg_server(server)
