"""An adaptive (``decide:``) sweep's answers are read by its own anytime-valid rule: the CLI's
``findings``, the leaderboard's first lines and the ablation table's summary give each variant's
same-LR finding the interval and verdict of its leaderboard row (sequential.onto_board), not
the fixed-n t reading, which calls a row "better" that the rule still holds open
(tests/support/decide_answers_db.py). A rule on another metric leaves the fixed reading."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import results_db
from contract.metrics import VAL_LOSS, VAL_PPL
from orchestrator.cli.main import main
from orchestrator.cli.read import stored_rule
from results_db.analysis.findings import SAME_LR, Estimate
from tests.support import decide_answers_db
from tests.support.decide_answers_db import SWEEP


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return decide_answers_db.built(tmp_path_factory.mktemp("adaptive"))


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # noqa: ANN401 - JSON doc
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return json.loads(cap.out)


def _boards(url: str) -> tuple[dict, dict]:
    """({variant: leaderboard row} read by the stored rule, the same read fixed-n)."""
    with results_db.open(url, readonly=True) as db:
        rule = stored_rule(db, SWEEP, VAL_PPL)
        assert rule is not None
        anytime, fixed = db.leaderboard(SWEEP, decide=rule), db.leaderboard(SWEEP)
    return ({r["variant"]: r for r in anytime.iter_rows(named=True)},
            {r["variant"]: r for r in fixed.iter_rows(named=True)})


def test_findings_same_lr_rows_are_the_leaderboards_anytime_rows(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _cli(capsys, "findings", SWEEP, "--db", url, "--format", "json")
    same = {r["variant"]: r for r in doc["rows"] if r["question"] == SAME_LR}
    anytime, fixed = _boards(url)
    assert set(same) == {"g1", "g2"}
    for v, row in same.items():
        a = anytime[v]
        assert a["ci_method"] == "anytime-valid"
        assert row["verdict"] == a["verdict"], v
        assert row["estimate"] == Estimate(a["delta_pct"], "%", a["ci_low_pct"],
                                           a["ci_high_pct"], a["ci_level"]).text(), v
        assert (a["ci_low_pct"], a["ci_high_pct"]) != (fixed[v]["ci_low_pct"],
                                                       fixed[v]["ci_high_pct"]), v
    # the scenario: fixed-n t calls g1 better; its own rule holds it open
    assert fixed["g1"]["verdict"] == "better"
    assert same["g1"]["verdict"] == "needs >= 7 seeds"
    assert same["g1"]["estimate"] == "-2.67 % [97.5 % CI -6.01, +0.68]"
    assert same["g1"]["rule"] == ("anytime-valid mixture-t intervals, Bonferroni over the 2 "
                                  "rows with a CI: each CI at 97.5 %, family-wise error <= 5 %")
    assert "1 of 2 variants better (g2 -30.00 % [97.5 % CI -30.44, -29.56]); 1 needing more " \
           "seeds" in doc["summary"]


def test_leaderboard_and_table_open_with_the_rules_answers(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with results_db.open(url, readonly=True) as db:
        owner = db.findings(SWEEP, decide=stored_rule(db, SWEEP, VAL_PPL)).text()
    board = _cli(capsys, "leaderboard", SWEEP, "--db", url, "--format", "json")
    assert board["summary"].startswith(owner + "\n")
    assert "g1 -2.67 % [95 % CI" not in board["summary"]  # no fixed-n headline
    table = _cli(capsys, "table", SWEEP, "--db", url, "--format", "json")
    assert table["summary"].startswith(owner)


def test_a_rule_on_another_metric_keeps_the_fixed_reading(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        rule = stored_rule(db, SWEEP, VAL_PPL)
        assert rule is not None and stored_rule(db, SWEEP, VAL_LOSS) is None
        fixed = db.findings(SWEEP)
        assert db.findings(SWEEP, decide=replace(rule, metric=VAL_LOSS)) == fixed
    g1 = next(f for f in fixed.answers[0].findings if f.subject == "g1")
    assert g1.verdict == "better" and g1.estimate is not None and g1.estimate.level == 0.95
