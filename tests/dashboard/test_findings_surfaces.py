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


def _labels(frames: list) -> dict[str, str]:  # noqa: ANN001 - pandas frames of a chart
    """{row: its verdict label} from the dot plot's datasets."""
    return {r: v for f in frames if {"row", "verdict", "label_x"} <= set(f.columns)
            for r, v in zip(f["row"], f["verdict"], strict=True)}


def test_delta_plot_labels_carry_the_baseline_condition(url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """silu_only is "better" at 3e-2 only against a baseline 41.7 % worse there than at its
    best LR: the dot plot's label beside its CI says so, in the owner's words (the leaderboard's
    condition column, untuned.py), on the Leaderboard page and in the report; a row whose
    baseline is tuned says its verdict alone."""
    import pandas as pd

    from tests.support.apppage import chart_datasets

    with results_db.open(url, readonly=True) as db:
        board = db.leaderboard(SWEEP)
        report = content.build(db, SWEEP)
    cond = board.filter(variant="silu_only")["condition"][0]
    assert cond.startswith("vs an untuned baseline (41.7 % worse")
    monkeypatch.setenv("GATESWEEP_DB", url)
    at = open_page("Leaderboard", SWEEP)
    page = _labels(chart_datasets(at, 0))
    dots = next(b for s in report.sections for b in s.blocks
                if getattr(b, "id", None) == "leaderboard-chart")
    drawn = _labels([pd.DataFrame(v) for v in dots.spec["datasets"].values()])
    for labels in (page, drawn):
        assert labels["silu_only @ lr=3e-2"] == f"better, {cond}", labels
        assert labels["gated @ lr=1e-2"] == "better", labels  # the baseline tuned there
