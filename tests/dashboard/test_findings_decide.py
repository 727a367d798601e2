"""An adaptive (``decide:``) sweep on the dashboard and in the report is read by its stored rule,
as the CLI reads it (tests/support/decide_answers_db.py: fixed-n t calls g1 better, the sweep's
anytime-valid rule holds it open): the Answers page and the Leaderboard's first lines show the
CLI's Findings; the report's first page is those answers, and its leaderboard section says the
rule's sentence (db.decide_sentence) above the rows' anytime-valid intervals."""

from __future__ import annotations

import json

import pytest

import results_db
from contract.metrics import VAL_PPL
from contract.textout import md_inline
from dashboard.boardtable import DELTA_PCT
from dashboard.mdtext import md
from dashboard.report import content, markdown
from dashboard.report.answers import SHOWN
from dashboard.report.model import Table
from dashboard.tables import fmt_delta_ci
from orchestrator.cli.main import main
from orchestrator.cli.read import stored_rule
from results_db.analysis.findings import Findings
from tests.support import decide_answers_db
from tests.support.apppage import open_page
from tests.support.decide_answers_db import SWEEP


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return decide_answers_db.built(tmp_path_factory.mktemp("adaptive"))


@pytest.fixture(scope="module")
def cli_findings(db_url: str) -> Findings:
    """The Findings the CLI prints (its findings command reads the stored rule so)."""
    with results_db.open(db_url, readonly=True) as db:
        return db.findings(SWEEP, decide=stored_rule(db, SWEEP, VAL_PPL))


def test_dashboard_answers_are_the_clis(url: str, cli_findings: Findings,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["findings", SWEEP, "--db", url, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == cli_findings.rows() and doc["summary"] == cli_findings.text()
    assert "1 needing more seeds" in cli_findings.lines()[1]  # g1: open by the rule
    from dashboard import data
    from dashboard.views.decide import decide_rule

    assert data.findings(url, SWEEP, decide=decide_rule(url, SWEEP, VAL_PPL)) == cli_findings
    head, *rest = cli_findings.lines()
    lines = [f"**{md(head)}**", *(md(x) for x in rest)]
    for page in ("Answers", "Leaderboard"):  # the first screen, the leaderboard's first lines
        shown = [m.value for m in open_page(page, SWEEP).markdown]
        start = shown.index(lines[0])
        assert shown[start:start + len(lines)] == lines, page


def test_report_reads_the_sweep_by_its_rule(db_url: str, cli_findings: Findings) -> None:
    with results_db.open(db_url, readonly=True) as db:
        report = content.build(db, SWEEP)
        rule = stored_rule(db, SWEEP, VAL_PPL)
        assert rule is not None
        sentence = db.decide_sentence(SWEEP, rule)
        anytime = {r["variant"]: r for r in db.leaderboard(SWEEP, decide=rule).iter_rows(
            named=True)}
        fixed = {r["variant"]: r for r in db.leaderboard(SWEEP).iter_rows(named=True)}
    first = report.sections[0]
    assert first.id == "answers" and first.sentences == tuple(cli_findings.lines())
    (table,) = [b for b in first.blocks if isinstance(b, Table)]
    assert table.frame.to_dicts() == [{c: r[c] for c in SHOWN} for r in cli_findings.rows()]
    board = next(s for s in report.sections if s.id == "leaderboard")
    assert board.sentences[0] == sentence
    (rows,) = [b for b in board.blocks if isinstance(b, Table)]
    assert "anytime-valid mixture-t intervals" in rows.caption
    # the intervals are the rule's (Bonferroni, anytime-valid): no header claims a 95 % CI
    assert not [c for c in rows.frame.columns if "95" in c], rows.frame.columns
    cells = {v.removesuffix(" (baseline)"): c for v, c in
             zip(rows.frame["variant"], rows.frame[DELTA_PCT], strict=True)}
    for v in ("g1", "g2"):
        a, f = anytime[v], fixed[v]
        assert cells[v] == fmt_delta_ci(a["delta_pct"], a["ci_low_pct"], a["ci_high_pct"]), v
        assert cells[v] != fmt_delta_ci(f["delta_pct"], f["ci_low_pct"], f["ci_high_pct"]), v
    text = markdown.render(report, "figures", lambda c: f"{c.id}.svg")
    assert md_inline(sentence) in text and cells["g1"] in text
