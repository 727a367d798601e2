"""Hostile input: the one output writer (orchestrator/cli/outfiles.py). `query`/`export --out
DIR/x.csv` wrote a predictable temp name `DIR/.x.csv.PID.tmp` without O_EXCL/O_NOFOLLOW: with
symlinks planted at those names by a co-writer of DIR, an unrelated file was overwritten and
x.csv became a symlink to it. `--out` onto a symlink to a regular file silently replaced the
link."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.cli.outfiles import write_files
from tests import sample_db


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample_db.copy_to(tmp_path_factory.mktemp("outfiles"))


def _plant(directory: Path, name: str, victim: Path, pids: range) -> None:
    """Symlinks at every temp name the old writer could pick (its pid is ours: in-process)."""
    for pid in pids:
        (directory / f".{name}.{pid}.tmp").symlink_to(victim)


def test_planted_temp_name_symlinks_are_never_followed(
        url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    _plant(shared, "x.csv", victim, range(os.getpid(), os.getpid() + 1))
    code = main(["query", "select 1 as a", "--format", "csv", "--out", str(shared / "x.csv"),
                 "--db", url])
    capsys.readouterr()
    assert code == 0
    assert victim.read_text() == "precious\n"
    target = shared / "x.csv"
    assert not target.is_symlink() and target.read_text() == "a\n1\n"
    # export: the three Parquet files, each with a planted temp name
    out = tmp_path / "export"
    out.mkdir()
    for name in ("runs", "summaries", "metrics"):
        _plant(out, f"{name}.parquet", victim, range(os.getpid(), os.getpid() + 1))
    assert main(["export", "--out", str(out), "--db", url]) == 0
    capsys.readouterr()
    assert victim.read_text() == "precious\n"
    assert all(not (out / f"{n}.parquet").is_symlink() for n in ("runs", "summaries", "metrics"))


def test_a_symlink_at_the_target_is_refused_unless_asked(
        url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "real.csv"
    real.write_text("keep\n")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    code = main(["query", "select 1 as a", "--format", "csv", "--out", str(link), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "symbolic link" in err, err
    assert "--replace-symlink" in err
    assert link.is_symlink() and real.read_text() == "keep\n"
    code = main(["query", "select 1 as a", "--format", "csv", "--out", str(link), "--db", url,
                 "--replace-symlink"])
    assert code == 0, capsys.readouterr().err
    # asked: the link is replaced by the file; what it pointed to is left alone
    assert not link.is_symlink() and link.read_text() == "a\n1\n"
    assert real.read_text() == "keep\n"


def test_export_refuses_a_symlinked_file_too(url: str, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "export"
    out.mkdir()
    elsewhere = tmp_path / "elsewhere.parquet"
    elsewhere.write_bytes(b"keep")
    (out / "runs.parquet").symlink_to(elsewhere)
    code = main(["export", "--out", str(out), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err, err
    assert elsewhere.read_bytes() == b"keep"
    assert sorted(p.name for p in out.iterdir()) == ["runs.parquet"]  # none of the three


def test_written_files_get_the_usual_mode_and_no_temp_is_left(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_files({tmp_path / "a.txt": lambda fh: fh.write(b"x")})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_failing_writer_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("old")

    def boom(fh: object) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(Exception, match="No space left"):
        write_files({tmp_path / "a.txt": lambda fh: fh.write(b"x"), tmp_path / "b.txt": boom})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]
    assert (tmp_path / "b.txt").read_text() == "old"


def test_query_json_is_valid_json_for_non_finite_values(url: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """`query --format json` wrote Infinity/NaN (not JSON): null, as in the conclusion
    commands' JSON."""
    sql = "select 1e999 as inf, -1e999 as ninf, 0.5 as x"
    assert main(["query", sql, "--format", "json", "--db", url]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    assert doc == [{"inf": None, "ninf": None, "x": 0.5}]
    out = tmp_path / "q.json"
    assert main(["query", sql, "--format", "json", "--out", str(out), "--db", url]) == 0
    assert json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(c)) == doc


def test_a_symlinked_output_folder_is_refused_unless_asked(url: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    """export --out LINK (and report's Markdown REPORT_files folder, by the same out_dir):
    files written through a link land wherever it points."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "runs.parquet").write_bytes(b"keep")
    link = tmp_path / "exported"
    link.symlink_to(victim)
    code = main(["export", "--out", str(link), "--db", url])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "symbolic link" in err, err
    assert (victim / "runs.parquet").read_bytes() == b"keep"
    assert main(["export", "--out", str(link), "--db", url, "--replace-symlink"]) == 0
    capsys.readouterr()
    assert (victim / "runs.parquet").read_bytes() != b"keep"  # asked: written into its target
