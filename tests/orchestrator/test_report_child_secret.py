"""`orchestrator report` hands the results-DB URL (which may carry a password) to its child in
the environment, never on the command line that `ps` shows every user; the report is built
from it all the same."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

import results_db
from orchestrator.cli import report as report_cli
from orchestrator.cli.main import main
from results_db.engine import DB_ENV
from tests.support import findings_db


def test_the_db_url_reaches_the_child_by_environment_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'secret-pw.db'}"
    db = results_db.open(url)
    findings_db.build(db)
    db.close()
    seen: list[tuple[list[str], dict[str, str]]] = []
    real = subprocess.run

    def spy(cmd: list[str], **kw: Any) -> Any:  # the real child, its argv and env recorded
        seen.append((list(cmd), dict(kw["env"])))
        return real(cmd, **kw)

    monkeypatch.setattr(report_cli.subprocess, "run", spy)
    out = tmp_path / "r.html"
    assert main(["report", findings_db.SWEEP, "--db", url, "--out", str(out)]) == 0
    (argv, env), = seen
    assert not any("secret-pw" in a for a in argv), argv
    assert env[DB_ENV] == url
    assert out.stat().st_size > 10_000 and findings_db.SWEEP in out.read_text()
