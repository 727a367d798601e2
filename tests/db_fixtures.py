"""Pytest plugin: results-DB URLs for SQLite and a throwaway PostgreSQL server.

Registered in tests/conftest.py as ``pytest_plugins = ["tests.db_fixtures"]``.

- ``sqlite_url``: a fresh SQLite file URL in tmp_path.
- ``pg_server`` (session): one PostgreSQL server from Debian's ``postgresql`` package, started
  with ``initdb`` + ``pg_ctl`` in a temp dir (as the ``postgres`` user when we are root: initdb
  refuses root), stopped and removed at session end. Skips, with the reason, without initdb.
- ``pg_url``: a fresh database on that server per test (dropped afterwards).
- ``db_url``: parametrized over ["sqlite", "postgres"], so a DB test runs on both backends.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def find_pg_bin() -> Path | None:
    """The newest PostgreSQL server bin dir (Debian layout), or one holding initdb on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgServer:
    bin_dir: Path
    root: Path
    port: int
    as_user: list[str]

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute(sql)

    def pg_ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.as_user, str(self.bin_dir / "pg_ctl"), "-D",
                               str(self.root / "data"), *args],
                              capture_output=True, text=True, timeout=60)


def start_pg_server() -> PgServer:
    """initdb + pg_ctl start in a fresh temp dir (short path: the socket lives there)."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise FileNotFoundError("no PostgreSQL initdb (apt-get install -y postgresql)")
    root = Path(tempfile.mkdtemp(prefix="gs-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as Debian's postgres user
        shutil.chown(root, user="postgres", group="postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    root.chmod(0o700)
    init = subprocess.run([*as_user, str(bin_dir / "initdb"), "-D", str(root / "data"), "-A",
                           "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
                          capture_output=True, text=True, timeout=120)
    if init.returncode:
        raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
    server = PgServer(bin_dir, root, _free_port(), as_user)
    opts = (f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    started = server.pg_ctl("-w", "-l", str(root / "server.log"), "-o", opts, "start")
    if started.returncode:
        log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {log[-2000:]}")
    return server


def stop_pg_server(server: PgServer) -> None:
    server.pg_ctl("-m", "immediate", "-w", "stop")
    shutil.rmtree(server.root, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL server binaries not found (no initdb under "
                    "/usr/lib/postgresql/*/bin or on PATH); `make system-deps` installs them")
    server = start_pg_server()
    try:
        yield server
    finally:
        stop_pg_server(server)


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    name = f"t_{uuid.uuid4().hex[:12]}"
    pg_server.admin(f"CREATE DATABASE {name}")
    try:
        yield pg_server.url(name)
    finally:
        pg_server.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")
