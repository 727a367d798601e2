"""A throwaway PostgreSQL server for tests and benchmarks (Debian's postgresql package).

``start_pg_server()`` runs ``initdb`` in a fresh temp dir (as the ``postgres`` user when we
are root: initdb refuses root) and ``pg_ctl start`` on a free port with fsync off;
``stop_pg_server()`` stops it and removes the dir. Not for production data.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.ports import free_port


def find_pg_bin() -> Path | None:
    """The newest PostgreSQL server bin dir (Debian layout), or one holding initdb on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


@dataclass
class PgServer:
    bin_dir: Path
    root: Path
    port: int
    as_user: list[str]

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{dbname}"

    def admin(self, sql: str, dbname: str = "postgres") -> None:
        """Run SQL as the superuser with autocommit (CREATE/DROP DATABASE need it)."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname=dbname, autocommit=True) as conn:
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
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
    server = PgServer(bin_dir, root, free_port(), as_user)
    opts = (f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    started = server.pg_ctl("-w", "-l", str(root / "server.log"), "-o", opts, "start")
    if started.returncode:
        log = (root / "server.log").read_text() if (root / "server.log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"pg_ctl start failed: {started.stderr.strip()} {log[-2000:]}")
    return server


def stop_pg_server(server: PgServer) -> None:
    """Stop and delete the server (idempotent: a second call finds nothing to do)."""
    if not server.root.exists():
        return
    server.pg_ctl("-m", "immediate", "-w", "stop")
    shutil.rmtree(server.root, ignore_errors=True)
