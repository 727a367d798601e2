"""`orchestrator factorial SWEEP` prints what db.factorial returns, unchanged: JSON/CSV rows are
its cells then its contrasts, the summary is its sentence with the cells' rule, the table shows
the verdicts, a decide: sweep is read by its stored rule (anytime-valid), and a sweep without
the 2x2 gets one line, exit 0 (tests/support/factorial_db.py)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import polars as pl
import pytest

import results_db
from orchestrator.cli.main import main
from orchestrator.cli.read import stored_decide
from tests.support import factorial_db as f2
from tests.support import synthdb


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('f2') / 'f2.db'}"
    with results_db.open(url) as db:
        f2.build(db)
        f2.build(db, ("baseline", "dense_g1", "nsa_equal", "nsa_gated"), sweep="no-corner")
    return url


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_json_is_the_api_table_and_sentence(capsys: pytest.CaptureFixture[str],
                                            url: str) -> None:
    code, out, err = run_cli(capsys, "factorial", f2.SWEEP, "--db", url, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    fac = results_db.open(url, readonly=True).factorial(f2.SWEEP)
    assert doc["summary"] == (f"{fac.sentence()}\nCells: the leaderboard's rows "
                              f"({fac.cell_rule}).")
    assert doc["rows"] == fac.table().to_dicts()
    assert [(r["row"], r["name"], r["verdict"]) for r in doc["rows"][4:]] == [
        ("main effect", "sparse", "within noise"), ("main effect", "gated", "better"),
        ("interaction", "sparse x gated", "better")]
    assert [(r["sparse"], r["gated"]) for r in doc["rows"][:4]] == [
        ("off", "off"), ("on", "off"), ("off", "on"), ("on", "on")]


def test_csv_and_table(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, _ = run_cli(capsys, "factorial", f2.SWEEP, "--db", url, "--format", "csv")
    assert code == 0 and pl.read_csv(StringIO(out)).height == 7
    code, out, _ = run_cli(capsys, "factorial", f2.SWEEP, "--db", url)
    assert code == 0
    assert "sparse x gated interaction better -4.00 % [-4.40, -3.60]" in " ".join(out.split())
    assert "[-4.40, -3.60] %" in out and "nsa_equal_g1" in out


def test_no_2x2_is_one_line_exit_0(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = run_cli(capsys, "factorial", "no-corner", "--db", url, "--format", "json")
    assert code == 0 and not err
    assert out == (
        "Sweep no-corner has no 2x2 of sparse (nsa = equal) x gated (gate_position = G1): no "
        "variant is sparse on, gated on beside baseline 'baseline'.\n")


def test_a_decide_sweep_is_read_by_its_stored_rule(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'adaptive.db'}"
    spec = {**f2.spec(sweep="adaptive"), "exclude": [],
            "decide": {"metric": "val/ppl", "margin": 0.01, "error_rate": 0.05,
                       "first_seeds": 5, "max_seeds": 10}}
    del spec["seeds"]
    with results_db.open(url) as db:
        for reg in synthdb.register(db, spec):
            if reg.run.seed in f2.PAIRED:  # seeds 0-3 finished, the others still pending
                synthdb.play(db, reg.id, summaries={"val/ppl": f2.ppl(reg.run.variant,
                                                                       reg.run.seed)})
    code, out, err = run_cli(capsys, "factorial", "adaptive", "--db", url, "--format", "json")
    assert code == 0, err
    db = results_db.open(url, readonly=True)
    decide = stored_decide(db, "adaptive")
    assert decide is not None
    fac = db.factorial("adaptive", decide=decide.rule())
    assert json.loads(out)["rows"] == fac.table().to_dicts()
    assert fac.effects["ci_method"].to_list() == ["anytime-valid"] * 3
    assert "[anytime-valid mixture-t intervals, Bonferroni over the 3 contrasts: each CI at " \
           "98.33 %, family-wise error <= 5 %]." in json.loads(out)["summary"]
