"""Hostile input, numeric knobs. Every GATESWEEP_* number and every CLI number refuses what has no
meaning (NaN, inf, negative, text) in one line naming the variable or option, before the
command prints or changes anything. GATESWEEP_DB_WAIT_S=nan made the DB retry spin without
sleeping or giving up; GATESWEEP_STALE_AFTER=-5 flagged every run stale and 'abc' was refused
only after the table printed; a NUL in GATESWEEP_DB said "embedded null byte"."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import typer

import results_db
from orchestrator.cli.app import app
from orchestrator.cli.main import main
from orchestrator.run.health.dbretry import db_wait_s, with_db_retry
from tests import sample_db

ENV_CASES = [
    ("GATESWEEP_DB_WAIT_S", "nan"), ("GATESWEEP_DB_WAIT_S", "inf"),
    ("GATESWEEP_DB_WAIT_S", "-1"), ("GATESWEEP_DB_WAIT_S", "abc"),
    ("GATESWEEP_STALE_AFTER", "-5"), ("GATESWEEP_STALE_AFTER", "nan"),
    ("GATESWEEP_STALE_AFTER", "abc"),
    ("GATESWEEP_STALE_AFTER", "inf"),
    ("GATESWEEP_HEARTBEAT_S", "0"), ("GATESWEEP_HEARTBEAT_S", "nan"),
    ("GATESWEEP_HEARTBEAT_S", "-inf"),
]


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample_db.copy_to(tmp_path_factory.mktemp("knobs"))


@pytest.mark.parametrize(("name", "value"), ENV_CASES)
def test_a_meaningless_environment_number_is_one_line_before_any_output(
        name: str, value: str, url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    before = {r["id"]: r["status"] for r in
              results_db.open(url, readonly=True).runs(with_config=False).iter_rows(named=True)}
    for argv in (["status", "--db", url], ["rerun", "1", "--db", url, "--storage", "/nonexistent"]):
        code = main(argv)
        cap = capsys.readouterr()
        assert code == 2, (argv, cap)
        assert cap.out == "" and cap.err.count("\n") == 1, (argv, cap)
        assert f"{name}={value!r}" in cap.err or f"{name}={value}" in cap.err, cap.err
    after = {r["id"]: r["status"] for r in
             results_db.open(url, readonly=True).runs(with_config=False).iter_rows(named=True)}
    assert after == before


def test_db_wait_s_never_spins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATESWEEP_DB_WAIT_S", "nan")
    with pytest.raises(ValueError, match="GATESWEEP_DB_WAIT_S"):
        db_wait_s()
    calls = []

    def down() -> None:
        calls.append(1)
        raise results_db.DBUnavailable("down")

    with pytest.raises(ValueError, match="wait_s"):  # a caller passing NaN is refused too
        with_db_retry(down, "test", math.nan)
    assert len(calls) <= 1


def test_a_nul_in_gatesweep_db_names_the_variable(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment variable cannot hold a NUL, but a URL can, as %00."""
    monkeypatch.setenv("GATESWEEP_DB", "sqlite:///tmp/a%00b.db")
    assert main(["status"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1, cap
    assert "GATESWEEP_DB" in cap.err and "NUL" in cap.err, cap
    monkeypatch.delenv("GATESWEEP_DB")
    assert main(["status", "--db", "sqlite:///tmp/a%00b.db"]) == 2
    assert "db url" in capsys.readouterr().err


def _numeric_options() -> list[tuple[str, str]]:
    """(command, --option) of every int/float option of the CLI."""
    import typing

    cmd = typer.main.get_command(app)
    found = []
    for name, sub in cmd.commands.items():  # type: ignore[attr-defined]
        subs = sub.commands.items() if hasattr(sub, "commands") else [(None, sub)]
        for subname, c in subs:
            for p in c.params:
                ann = p.type_descriptor.annotation
                kinds = set(typing.get_args(ann)) | {ann}
                if p.opts[0].startswith("--") and kinds & {int, float}:
                    found.append((" ".join(filter(None, (name, subname))), p.opts[0]))
    return found


OPTIONS = _numeric_options()


def test_the_numeric_options_are_found() -> None:
    assert ("query", "--timeout") in OPTIONS and ("status", "--stale-after") in OPTIONS
    assert ("dashboard", "--port") in OPTIONS and len(OPTIONS) >= 8


@pytest.mark.parametrize(("command", "option"), OPTIONS)
@pytest.mark.parametrize("value", ["nan", "inf", "-1", "-inf"])
def test_every_cli_number_refuses_nan_inf_and_negatives(
        command: str, option: str, value: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*command.split(), f"{option}={value}", "--db", str(tmp_path / "none.db")])
    cap = capsys.readouterr()
    assert code == 2, (command, option, value, cap)
    assert cap.out == "" and option in cap.err, (command, option, value, cap)
    assert not (tmp_path / "none.db").exists()
