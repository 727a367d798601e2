"""Every surface that states a conclusion prints the one owner's answers (db.findings,
results_db/analysis/findings.py): the CLI's ``findings`` command and the leaderboard's first
lines, the dashboard's first screen (the Answers page) and the report's first page hold the
same Findings object and print the same lines. The sweep is tests/support/findings_db.py's:
a variant "better" only where the baseline is untuned, which no surface may call a headline
"better"."""

from __future__ import annotations

import json

import pytest

import results_db
from dashboard.report import content
from orchestrator.cli.main import main
from results_db.analysis.findings import Findings
from tests.support import findings_db
from tests.support.apppage import open_page
from tests.support.findings_db import SWEEP


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('surfaces') / 'f.db'}"
    with results_db.open(url) as db:
        findings_db.build(db)
    return url


@pytest.fixture(scope="module")
def owner(url: str) -> Findings:
    with results_db.open(url, readonly=True) as db:
        return db.findings(SWEEP)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([str(a) for a in args]) == 0
    return capsys.readouterr().out


def test_cli_prints_the_owners_findings(url: str, owner: Findings,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_cli(capsys, "findings", SWEEP, "--db", url, "--format", "json"))
    assert doc["rows"] == owner.rows()
    assert doc["summary"] == owner.text()
    # the leaderboard opens with the same answers; its per-LR rows are details below them
    board = _cli(capsys, "leaderboard", SWEEP, "--db", url)
    assert " ".join(board.split()).startswith(" ".join(owner.text().split()))  # rich wraps
    rows = _cli(capsys, "leaderboard", SWEEP, "--db", url, "--format", "markdown")
    silu = next(ln for ln in rows.splitlines() if ln.startswith("| ") and "silu_only" in ln)
    assert "| better |" in silu  # a per-LR detail, with its baseline's condition beside it
    assert "vs an untuned baseline (41.7 % worse than at its best LR 1e-2)" in silu


def test_no_headline_better_from_an_untuned_row(owner: Findings) -> None:
    for line in owner.lines():
        assert "silu_only -" not in line  # its -20.6 % at 3e-2 is a detail only
    assert "silu_only" in owner.lines()[1] and "not run at 1e-2" in owner.lines()[1]


def test_dashboard_first_screen_is_the_owners_findings(url: str, owner: Findings,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard import data

    monkeypatch.setenv("GATESWEEP_DB", url)
    assert data.findings(url, SWEEP) == owner
    at = open_page("Answers", SWEEP)
    assert at.sidebar.radio(key="page").options[0] == "Answers"  # the first screen
    shown = [m.value for m in at.markdown]
    head, *rest = owner.lines()
    from dashboard.mdtext import md

    assert shown[:len(owner.lines())] == [f"**{md(head)}**", *(md(x) for x in rest)]


def test_report_first_page_is_the_owners_findings(url: str, owner: Findings) -> None:
    with results_db.open(url, readonly=True) as db:
        report = content.build(db, SWEEP)
    first = report.sections[0]
    assert first.id == "answers" and first.sentences == tuple(owner.lines())
    tables = {b.id: b for b in first.blocks if hasattr(b, "frame")}
    assert tables["answer-2"].frame["variant"].to_list() == ["gated", "silu_only", "kv_x2"]
