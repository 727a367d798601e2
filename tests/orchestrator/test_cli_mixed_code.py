"""No silent mixing: when the runs a conclusion compares were trained by different
code or packages, `leaderboard`, `table`, `effects`, `stability` and `scaling` say so in
results_db's one sentence (db.code_mix); when they were not, they say nothing more. The DBs are
the 57-run gates-toy sweep registered by the real submit path (tests/support/report_db.py)."""

from __future__ import annotations

import json

import pytest

import results_db
from orchestrator.cli.main import main
from tests.support import report_db

COMMANDS = ("leaderboard", "table", "effects", "stability", "scaling")


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("mix")
    return {kind: report_db.build(f"sqlite:///{tmp / kind}.db", mixed=kind == "mixed")
            for kind in ("mixed", "same")}


def _summary(capsys: pytest.CaptureFixture[str], command: str, url: str) -> str:
    code = main([command, report_db.SWEEP, "--db", url, "--format", "json"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return json.loads(cap.out)["summary"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_comparison_across_code_versions_says_so(capsys: pytest.CaptureFixture[str],
                                                   dbs: dict[str, str], command: str) -> None:
    sentence = results_db.open(dbs["mixed"], readonly=True).code_mix(report_db.SWEEP).sentence
    assert sentence is not None and sentence.startswith("Mixed provenance: the 57 runs")
    assert "0123456789ab: 3 runs" in sentence and "2.12.0+cpu: 3 runs" in sentence
    summary = _summary(capsys, command, dbs["mixed"])
    assert summary.splitlines()[-1] == sentence
    assert "Mixed provenance" not in _summary(capsys, command, dbs["same"])


def test_the_table_prints_the_sentence_above_the_table(capsys: pytest.CaptureFixture[str],
                                                       dbs: dict[str, str]) -> None:
    assert main(["leaderboard", report_db.SWEEP, "--db", dbs["mixed"]]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Mixed provenance: the 57 runs compared were trained by 2 code versions" in out


def test_show_prints_each_attempts_provenance(capsys: pytest.CaptureFixture[str],
                                              dbs: dict[str, str]) -> None:
    db = results_db.open(dbs["mixed"], readonly=True)
    silu = db.runs(report_db.SWEEP, variant=report_db.OTHER_VARIANT)["id"][0]
    assert main(["show", str(silu), "--db", dbs["mixed"]]) == 0
    out = capsys.readouterr().out
    assert "provenance" in out and "0123456789ab" in out and "2.12.0+cpu" in out
    assert 'deepspeed config (attempt 1): {"train_micro_batch_size_per_gpu": 8' in out
