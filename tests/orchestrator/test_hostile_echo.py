"""What an error echoes back is bounded. 30,000 unknown keys printed 30,001 error
lines; a 100 KB value (an argument, a key) was echoed whole in the one error line."""

from __future__ import annotations

from pathlib import Path

import pytest

import results_db
from contract.textout import CLIP, clip
from orchestrator.cli.main import main

BIG = "y" * 100_000


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('echo') / 'r.db'}"
    results_db.open(url).close()
    return url


def test_thirty_thousand_unknown_keys_print_a_bounded_list(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    f = tmp_path / "many.yaml"
    f.write_text("name: t\nbase:\n  model: {preset: tiny}\n  train:\n"
                 + "".join(f"    k{i}: 1\n" for i in range(30_000))
                 + "variants:\n  baseline: {}\n")
    assert main(["validate", str(f), "--no-data"]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) <= 25, len(lines)
    assert "30000 problems" in lines[0] and "base.train.k0" in lines[1]
    assert "and 29980 more" in lines[-1], lines[-1]


@pytest.mark.parametrize("argv", [
    ["status", BIG], ["show", BIG], ["runs", "--sweep", BIG], ["rerun", BIG],
    ["cancel", BIG], ["leaderboard", BIG], ["runs", "--status", BIG],
    ["query", "select 1", "--format", BIG], ["validate", BIG], ["status", "--stale-after", BIG]],
    ids=lambda a: a[0] + ("-" + a[1] if a[1].startswith("--") else ""))
def test_a_huge_argument_is_echoed_truncated(argv: list[str], url: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*argv, "--db", url])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err) < 2 * CLIP + 400, len(err)
    assert "more characters" in err or "y" * 50 not in err, err[:300]


def test_a_huge_key_in_a_sweep_file_is_echoed_truncated(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    f = tmp_path / "bigkey.yaml"
    f.write_text(f"name: t\nbase:\n  model: {{preset: tiny}}\n  train: {{{BIG}: 1}}\n"
                 "variants:\n  baseline: {}\n")
    assert main(["validate", str(f), "--no-data"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 2 * CLIP + 400, len(err)
    assert err.startswith("error: invalid sweep: ") and "bigkey.yaml:4: base.train.yyy" in err


def test_clip_keeps_short_lines_and_cuts_long_ones_in_the_middle() -> None:
    assert clip("short\nlines") == "short\nlines"
    cut = clip("a" * 10 + "b" * 100_000 + "c" * 10)
    assert cut.startswith("a" * 10) and cut.endswith("c" * 10) and len(cut) < CLIP + 60
    assert "more characters" in cut
