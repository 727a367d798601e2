"""Every child Python the CLI starts (contract/child.py) and what it hands on.

No child runs code from the directory the user typed the command in: a planted ``dashboard/``,
``orchestrator/``, ``streamlit/``, ``results_db/`` package or ``polars.py`` there writes a marker
file when imported, and ``orchestrator report``, the detached rerun's child and ``orchestrator
dashboard`` run from that directory leave none. ``rerun --detach`` and the dashboard's button
hand the DB, the storage and ``--address`` to their child, and a run they refuse stays as it
was (nothing is set pending for a child that would refuse it).
"""

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
from contract.child import child_env, python_command
from orchestrator.cli.main import main
from tests.support import smokedb

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "sweeps" / "smoke.yaml"
CLI = Path(sys.executable).parent / "orchestrator"  # the console script a user types
PLANTED = ("dashboard/__init__.py", "orchestrator/__init__.py", "streamlit/__init__.py",
           "results_db/__init__.py", "contract/__init__.py", "polars.py", "typer.py")


@pytest.fixture()
def filled(tmp_path: Path) -> str:
    """The smoke sweep: run 1 succeeded with a loss curve, run 2 failed, run 3 pending."""
    return smokedb.fill(f"sqlite:///{tmp_path / 'results.db'}")


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    """A working directory whose every planted module writes PWNED-<name> when imported."""
    here = tmp_path / "cwd"
    for rel in PLANTED:
        f = here / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"open({'PWNED-' + rel.replace('/', '_')!r}, 'w').close()\n")
    return here


def _markers(where: Path) -> list[str]:
    return sorted(p.name for p in where.glob("PWNED-*"))


class _Spawned:
    """Stands in for the detached child's Popen: records its command and environment."""

    calls: list[tuple[list[str], dict[str, str]]] = []

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None, **_: object) -> None:
        _Spawned.calls.append((list(cmd), dict(env or {})))
        self.pid = 4242


def test_the_owner_leaves_the_working_directory_out(planted: Path) -> None:
    """The planted directory is really poisonous: a plain ``python -m`` runs the plant."""
    plain = subprocess.run([sys.executable, "-m", "polars"], cwd=planted, capture_output=True)
    assert _markers(planted) == ["PWNED-polars.py"], plain.stderr
    (planted / "PWNED-polars.py").unlink()
    safe = subprocess.run(python_command("streamlit", "version"), cwd=planted, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert safe.returncode == 0 and "Streamlit" in safe.stdout, safe.stderr
    assert _markers(planted) == []


def test_report_from_a_planted_directory_runs_none_of_it(filled: str, planted: Path) -> None:
    out = planted / "r.html"
    proc = subprocess.run([str(CLI), "report", "smoke", "--db", filled, "--out", str(out)],
                          cwd=planted, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > 0
    assert _markers(planted) == []


def test_the_detached_rerun_child_runs_none_of_it(
        filled: str, planted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The button's child command, run for real from the planted directory: it reads the DB
    (the run is running again by then, so it refuses in one line) and imports nothing there."""
    import orchestrator.run.driver.rerun as rerun

    db = results_db.open(filled)
    failed = db.run("sdpa_elementwise-s0")
    monkeypatch.setattr(rerun.subprocess, "Popen", _Spawned)
    _Spawned.calls.clear()
    rerun.spawn_rerun(filled, failed.id, log_dir=tmp_path / "logs", storage=tmp_path / "st")
    monkeypatch.undo()  # subprocess.Popen is the real one again
    [(cmd, env)] = _Spawned.calls
    assert cmd[:3] == [sys.executable, "-P", "-m"] and env["PYTHONSAFEPATH"] == "1"
    db.start_attempt(failed.id, host="h")  # running: the real child refuses before training
    proc = subprocess.run(cmd, cwd=planted, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "are running; cancel them first" in proc.stderr, proc.stderr
    assert _markers(planted) == []


@pytest.mark.slow
def test_dashboard_from_a_planted_directory_runs_none_of_it(filled: str, planted: Path) -> None:
    from tests.support.ports import free_port

    port = free_port()
    proc = subprocess.Popen([str(CLI), "dashboard", "--port", str(port), "--db", filled],
                            cwd=planted, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health",
                                            timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert _markers(planted) == []


# ---- what the detached paths hand on, and what they leave alone ------------------------------

def test_rerun_detach_hands_address_storage_and_db_to_its_child(
        filled: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import orchestrator.run.driver.rerun as rerun

    reached: list[str | None] = []
    monkeypatch.setattr(rerun, "check_reachable", reached.append)
    monkeypatch.setattr(rerun.subprocess, "Popen", _Spawned)
    monkeypatch.chdir(tmp_path)  # the log dir is ./runs/_logs
    _Spawned.calls.clear()
    failed = results_db.open(filled).run("sdpa_elementwise-s0")
    assert main(["rerun", str(failed.id), "--db", filled, "--detach", "--address",
                 "ray://head:10001", "--storage", str(tmp_path / "st")]) == 0
    assert reached == ["ray://head:10001"]  # checked here, before anything was queued
    [(cmd, _)] = _Spawned.calls
    args = cmd[cmd.index("orchestrator") + 1:]
    assert args == ["rerun", str(failed.id), "--db", filled, "--storage",
                    str((tmp_path / "st").resolve()), "--address", "ray://head:10001"]
    assert results_db.open(filled).run(failed.id).status == "pending"


@pytest.mark.parametrize("how", ["cli", "button"])
def test_a_refused_detached_rerun_leaves_the_run_as_it_was(
        how: str, filled: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unreachable --address: refused in one line before the run is queued or a child is
    started (the child used to be started and the run left pending)."""
    import orchestrator.run.driver.rerun as rerun
    from contract.errors import UserError
    from tests.support.ports import free_port

    monkeypatch.setattr(rerun.subprocess, "Popen", _Spawned)
    monkeypatch.chdir(tmp_path)
    _Spawned.calls.clear()
    failed = results_db.open(filled).run("sdpa_elementwise-s0")
    nowhere = f"127.0.0.1:{free_port()}"
    if how == "cli":
        assert main(["rerun", str(failed.id), "--db", filled, "--detach", "--address",
                     nowhere]) == 2
    else:
        with pytest.raises(UserError, match="cannot be reached"):
            rerun.spawn_rerun(filled, failed.id, address=nowhere)
    assert results_db.open(filled).run(failed.id).status == "failed"
    assert _Spawned.calls == []
