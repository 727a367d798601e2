"""`orchestrator dashboard` owns its streamlit server: a SIGTERM, SIGINT or even SIGKILL sent
to the command alone (not its process group) stops the server too, and the port is free
again. It used to be a plain subprocess.call: the server kept serving after every SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import results_db
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2) as r:
            return r.read().decode() == "ok"
    except OSError:
        return False


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie is gone for our purposes
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads child pids from /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_stopping_the_command_stops_its_server(tmp_path: Path, sig: signal.Signals) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    results_db.open(url).close()
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "dashboard", "--port",
                             str(port), "--db", url], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    server: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None and not _healthy(port):
            time.sleep(0.5)
        assert _healthy(port), f"dashboard did not come up (exit {proc.poll()})"
        server = _children(proc.pid)
        assert len(server) == 1, server  # the streamlit server
        os.kill(proc.pid, sig)  # the command only, as a service manager or `kill PID` does
        rc = proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (_alive(server[0]) or _healthy(port)):
            time.sleep(0.3)
        assert not _alive(server[0]), f"streamlit {server[0]} outlived the command ({sig!r})"
        assert not _healthy(port)
        if sig is not signal.SIGKILL:
            assert rc == 0, rc  # a stop we were asked for is a clean exit
    finally:
        for pid in [proc.pid, *server]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=10)
