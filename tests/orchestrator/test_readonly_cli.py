"""Read-only commands never create, migrate or change a results DB (docs/architecture.md,
"CLI input and read-only access").

Every read command runs against a copy of the sample DB in rollback-journal mode and in WAL
mode; the DB file is hashed before and after (and a WAL file, if SQLite made one for the
read-only connection, stays empty). A missing DB is an error (exit 2) and is not created.
"""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.main import main
from tests import sample_db

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "sweeps" / "smoke.yaml"
GATES = ROOT / "sweeps" / "gates.yaml"

READ_COMMANDS: list[tuple[str, ...]] = [
    ("validate", str(GATES)),
    ("submit", str(GATES), "--dry-run"),
    ("query", "select count(*) as n from runs"),
    ("status",),
    ("status", "gates-toy"),
    ("runs", "--sweep", "gates-toy", "--status", "failed"),
    ("show", "1"),
    ("export", "--out", "{tmp}/export", "--sweep", "gates-toy"),
    ("leaderboard", "gates-toy"),
    ("table", "gates-toy", "--paper"),
    ("effects", "gates-toy"),
    ("factorial", "gates-toy"),
    ("stability", "lr-stability"),
    ("report", "gates-toy", "--out", "{tmp}/report.html"),
]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _argv(cmd: tuple[str, ...], tmp: Path, url: str) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in cmd] + ["--db", url]


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_read_commands_leave_the_db_bytes_unchanged(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path, journal: str) -> None:
    url = sample_db.copy_to(tmp_path)
    path = tmp_path / "sample.db"
    con = sqlite3.connect(path)
    assert con.execute(f"PRAGMA journal_mode={journal}").fetchone()[0] == journal
    con.close()
    before = sha(path)
    for cmd in READ_COMMANDS:
        code = main(_argv(cmd, tmp_path, url))
        out, err = capsys.readouterr()
        assert code == 0, (cmd, err)
        assert sha(path) == before, f"{cmd[0]} changed the DB's bytes"
        wal = path.with_name(path.name + "-wal")
        assert not wal.exists() or wal.stat().st_size == 0, f"{cmd[0]} wrote to the WAL"
    header = path.read_bytes()[18:20]  # SQLite's file-format bytes: 1,1 rollback; 2,2 WAL
    assert header == (b"\x02\x02" if journal == "wal" else b"\x01\x01")


@pytest.mark.parametrize("cmd", [c for c in READ_COMMANDS if c[0] not in ("validate", "submit")],
                         ids=lambda c: c[0])
def test_a_missing_db_is_an_error_and_is_not_created(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path, cmd: tuple[str, ...]) -> None:
    url = f"sqlite:///{tmp_path / 'typo.db'}"
    code = main(_argv(cmd, tmp_path, url))
    err = capsys.readouterr().err
    assert code == 2 and "typo.db does not exist" in err and "Traceback" not in err
    assert not (tmp_path / "typo.db").exists()


def test_db_may_be_a_plain_path_and_a_bad_url_is_one_line(capsys: pytest.CaptureFixture[str],
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    sample_db.copy_to(tmp_path)
    monkeypatch.chdir(tmp_path)
    for db in ("sample.db", str(tmp_path / "sample.db")):  # relative and absolute paths
        assert main(["leaderboard", "gates-toy", "--db", db]) == 0
        assert "baseline" in capsys.readouterr().out
    assert main(["status", "--db", "typo.db"]) == 2
    assert "typo.db does not exist" in capsys.readouterr().err
    assert not (tmp_path / "typo.db").exists()
    for bad in ("postgresql://me:secret@host:port/db", "://nothing", "mysql://h/db"):
        code = main(["status", "--db", bad])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: db url") and "Traceback" not in err, bad
        assert "secret" not in err


def test_dry_run_says_which_runs_of_the_sweep_the_file_no_longer_lists(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url = sample_db.copy_to(tmp_path)
    same = tmp_path / "gates.yaml"  # the file the sample's gates-toy runs came from
    same.write_text(GATES.read_text().replace("seeds: [0]", "seeds: [0, 1]"))
    assert main(["submit", str(same), "--dry-run", "--db", url]) == 0
    assert "note:" not in capsys.readouterr().out
    edited = tmp_path / "edited.yaml"  # same sweep name, one variant left
    edited.write_text("name: gates-toy\nbase: {model: {preset: tiny}}\n"
                      "variants: {baseline: {}}\nseeds: [0, 1]\n")
    assert main(["submit", str(edited), "--dry-run", "--db", url]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "note: sweep 'gates-toy' also holds 57 run(s) that" in out
    assert "(variants: baseline, sdpa_elementwise, sdpa_headwise" in out
    assert "stay in the sweep's leaderboard" in out


def test_validate_and_dry_run_without_a_db_create_none(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    for cmd in (("validate", str(SMOKE)), ("submit", str(SMOKE), "--dry-run")):
        assert main(_argv(cmd, tmp_path, url)) == 0
    captured = capsys.readouterr()
    assert "3 to run" in captured.out and "note:" not in captured.err  # no DB yet is normal
    assert list(tmp_path.iterdir()) == []
    # something that is not a results DB is worth a note (the sweep file is still valid)
    (tmp_path / "dir.db").mkdir()
    (tmp_path / "notes.txt").write_text("not a database\n")
    for db, why in (("dir.db", "is not a file"), ("notes.txt", "file is not a database")):
        for cmd in (("validate", str(SMOKE)), ("submit", str(SMOKE), "--dry-run")):
            assert main(_argv(cmd, tmp_path, str(tmp_path / db))) == 0
            err = capsys.readouterr().err
            assert f"note: results DB {tmp_path / db}" in err and why in err, (db, cmd)
            assert "DB states are not shown" in err


def test_an_outdated_or_foreign_db_is_refused_not_migrated(tmp_path: Path) -> None:
    not_db = tmp_path / "notes.db"
    not_db.write_text("just text\n")
    with pytest.raises(results_db.DBNotFound, match="cannot be read"):
        results_db.open(f"sqlite:///{not_db}", readonly=True)
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(results_db.DBNotFound, match="not a gatesweep results DB"):
        results_db.open(f"sqlite:///{empty}", readonly=True)
    url = f"sqlite:///{tmp_path / 'old.db'}"
    results_db.upgrade(url, "0001")  # the first revision only
    before = sha(tmp_path / "old.db")
    with pytest.raises(results_db.DBOutdated, match="orchestrator db upgrade"):
        results_db.open(url, readonly=True)
    assert sha(tmp_path / "old.db") == before


def test_a_readonly_handle_refuses_writes(tmp_path: Path) -> None:
    url = sample_db.copy_to(tmp_path)
    before = sha(tmp_path / "sample.db")
    db = results_db.open(url, readonly=True)
    with pytest.raises(Exception, match="not authorized|readonly|read-only"):
        db.ensure_sweep("new", "name: new")
    db.close()
    assert sha(tmp_path / "sample.db") == before


# Careless input on the sample DB: exit 2, one line naming what was wrong, no traceback, and
# the DB's bytes unchanged (cancel is a writer, but an unknown run or sweep writes nothing).
CARELESS: list[tuple[tuple[str, ...], str]] = [
    (("show", "99999999999999999999999"), "no run with id or name '99999999999999999999999'"),
    (("query", "select 1 a, 2 a"), "give each result column its own name"),
    (("query", "select :y"), "query: the database rejected the SQL: Incorrect number of bindings"),
    (("runs", "--sweep", "nosuch"), "no sweep named 'nosuch' in sqlite:///"),
    (("cancel", "--sweep", "nosuch"), "no sweep named 'nosuch'"),
    (("cancel", "99999"), "no run with id or name '99999'"),
    (("rerun", "--sweep", "nosuch"), "no sweep named 'nosuch'"),
    (("leaderboard", "gates-toy", "--metric", "val/pp"),
     "--metric: 'val/pp' is not a summary metric of sweep 'gates-toy'; known: "),
    (("table", "gates-toy", "--metrics", "val/ppl,nosuch"), "--metrics: 'nosuch' is not a"),
    (("effects", "gates-toy", "--metric", "nosuch"), "--metric: 'nosuch' is not a"),
    (("stability", "lr-stability", "--metric", "nosuch"), "--metric: 'nosuch' is not a"),
    (("query", "select 1 as a", "--out", "{tmp}"), "--out {tmp}: is a directory"),
    (("query", "select 1 as a", "--format", "csv", "--out", "{tmp}/afile/x.csv"),
     "--out {tmp}/afile/x.csv: {tmp}/afile is not a directory"),
    (("export", "--out", "{tmp}/afile"), "--out {tmp}/afile: is a file; expected a directory"),
    (("export", "--out", "{tmp}/afile/sub"), "the directory cannot be created (Not a directory)"),
]


@pytest.mark.parametrize("cmd,msg", CARELESS, ids=lambda v: "-".join(v)[:40]
                         if isinstance(v, tuple) else None)
def test_careless_input_is_one_line_and_writes_nothing(capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path, cmd: tuple[str, ...],
                                                       msg: str) -> None:
    url = sample_db.copy_to(tmp_path)
    (tmp_path / "afile").write_text("keep me\n")
    before = sha(tmp_path / "sample.db")
    code = main(_argv(cmd, tmp_path, url))
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert msg.replace("{tmp}", str(tmp_path)) in err, err
    assert sha(tmp_path / "sample.db") == before
    assert (tmp_path / "afile").read_text() == "keep me\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "sample.db"] + \
        (["sample.db-shm", "sample.db-wal"] if (tmp_path / "sample.db-wal").exists() else [])


def test_query_text_is_sql_as_written_and_out_files_are_whole(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    url = sample_db.copy_to(tmp_path)
    assert main(["query", "select ':x' as a", "--format", "csv", "--db", url]) == 0
    assert capsys.readouterr().out == "a\n:x\n"  # a colon in a literal is not a parameter
    out = tmp_path / "q.json"
    out.write_text("old")
    assert main(["query", "select 1 as a", "--format", "json", "--out", str(out), "--db",
                 url]) == 0
    assert out.read_text() == '[\n {\n  "a": 1\n }\n]\n'
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("cmd", [("cancel", "1"), ("cancel", "--sweep", "gates-toy"),
                                 ("rerun", "1"), ("rerun", "--sweep", "gates-toy")],
                         ids=lambda c: "-".join(c))
def test_writers_on_existing_runs_do_not_create_a_mistyped_db(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, cmd: tuple[str, ...]) -> None:
    code = main([*cmd, "--db", str(tmp_path / "typo.db")])
    err = capsys.readouterr().err
    assert code == 2 and "typo.db does not exist" in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_a_db_path_that_is_not_a_db_is_one_line_for_writers_too(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    (tmp_path / "notes.db").write_text("just text\n")
    cases = [(("db", "upgrade", "--db", str(tmp_path / "dir.db")),
              f"results DB {tmp_path / 'dir.db'} could not be opened: it is a directory"),
             (("db", "upgrade", "--db", str(tmp_path / "notes.db")),
              f"results DB {tmp_path / 'notes.db'} could not be opened: file is not a database"),
             (("db", "upgrade", "--db", str(tmp_path / "notes.db" / "r.db")),
              "could not be opened: its directory")]
    for cmd, msg in cases:
        code = main(list(cmd))
        err = capsys.readouterr().err
        assert code == 2 and msg in err and err.count("\n") == 1, err
    assert (tmp_path / "notes.db").read_text() == "just text\n"


def test_an_unanswering_postgres_host_fails_fast(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A listener that accepts and never answers: libpq alone would wait forever."""
    import socket
    import time

    import results_db.engine

    pytest.importorskip("psycopg")
    monkeypatch.setattr(results_db.engine, "PG_CONNECT_TIMEOUT_S", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql://u@127.0.0.1:{silent.getsockname()[1]}/db"
        for cmd, msg in ((("status",), "cannot be read: connection timeout expired"),
                         (("cancel", "--sweep", "x"), "cannot be read: connection timeout"),
                         (("db", "upgrade"), "could not be opened: connection timeout")):
            t0 = time.monotonic()
            code = main([*cmd, "--db", url])
            err = capsys.readouterr().err
            assert code == 2 and msg in err and err.count("\n") == 1, (cmd, err)
            assert time.monotonic() - t0 < 8, cmd  # a few connect attempts of 1 s each
