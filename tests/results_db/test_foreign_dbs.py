"""Hostile input: databases gatesweep did not make. An SQLite file or PostgreSQL schema holding
another tool's tables or Alembic history, or a newer gatesweep's schema revision, gets one line
naming what was found and what to do, from `db upgrade`, `status` and every open; not a byte
of it changes (no WAL switch before the check; SQLite: the file's bytes, PostgreSQL: the
catalog and rows, compared before and after). A newer gatesweep's DB is read with a warning
and refused for writes. Before: CommandError / DuplicateTable tracebacks, the foreign file
switched to WAL, a newer revision read silently."""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.main import main
from tests.db_fixtures import TEST_DB, PgServer

FUTURE = "9999_from_a_newer_gatesweep"


def files(path: Path) -> dict[str, str]:
    """Every file of the SQLite DB (it, -wal, -shm, -journal) with its hash."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.parent.glob(path.name + "*"))}


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _other_apps_alembic(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as c, c:
        c.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        c.execute("INSERT INTO alembic_version VALUES ('ae1027a6acf')")
        c.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        c.execute("INSERT INTO users (name) VALUES ('ada')")


def _newer_gatesweep(path: Path) -> str:
    url = f"sqlite:///{path}"
    results_db.upgrade(url)
    with contextlib.closing(sqlite3.connect(path)) as c:
        c.execute("UPDATE alembic_version SET version_num = ?", (FUTURE,))
        c.commit()
        c.execute("PRAGMA journal_mode=DELETE")  # no -wal/-shm: any switch would show
    return url


# ---------------------------------------------------------------------------- SQLite
def test_sqlite_with_another_apps_migrations_is_one_line_and_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "app.sqlite"
    _other_apps_alembic(f)
    before = files(f)
    for argv in (["db", "upgrade"], ["status"], ["runs"], ["query", "select 1"]):
        code, out, err = cli(capsys, *argv, "--db", str(f))
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        assert "ae1027a6acf" in err and "another tool" in err, (argv, err)
        assert files(f) == before, argv
    with pytest.raises(results_db.DBForeign):
        results_db.open(f"sqlite:///{f}")
    assert files(f) == before


def test_sqlite_from_a_newer_gatesweep_is_read_with_a_warning_not_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "r.db"
    url = _newer_gatesweep(f)
    before = files(f)
    code, out, err = cli(capsys, "db", "upgrade", "--db", url)
    assert code == 2 and err.count("\n") == 1 and FUTURE in err and "newer" in err, err
    assert files(f) == before  # no WAL switch, no Alembic
    code, out, err = cli(capsys, "status", "--db", url)
    assert code == 0 and "warning" in err and FUTURE in err and "newer" in err, err
    assert err.count("\n") == 1
    with pytest.raises(results_db.DBNewer, match=FUTURE):
        results_db.open(url)  # a writer: submit, rerun, cancel
    db = results_db.open(url, readonly=True)
    assert db.schema_note and FUTURE in db.schema_note
    assert files(f) == before


def test_the_dashboard_warns_about_a_newer_gatesweeps_db(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    url = _newer_gatesweep(tmp_path / "r.db")
    monkeypatch.setenv("GATESWEEP_DB", url)
    app = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
    at = AppTest.from_file(str(app), default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(FUTURE in str(w.value) for w in at.sidebar.warning)


def test_db_upgrade_does_not_create_missing_folders(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "typo" / "deeper" / "r.db"
    code, _, err = cli(capsys, "db", "upgrade", "--db", str(target))
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err, err
    assert not (tmp_path / "typo").exists()
    code, _, err = cli(capsys, "db", "upgrade", "--db", str(tmp_path / "r.db"))
    assert code == 0, err  # a new file in an existing folder is what db upgrade is for


def test_read_commands_leave_no_wal_or_shm_files(tmp_path: Path) -> None:
    f = tmp_path / "r.db"
    url = f"sqlite:///{f}"
    results_db.open(url).close()  # a WAL results DB, closed: no -wal/-shm beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"]
    before = files(f)
    for argv in (["status"], ["runs"], ["query", "select count(*) from runs"]):
        # a process of its own, as a user runs it: its connections close when it ends
        proc = subprocess.run([sys.executable, "-m", "orchestrator", *argv, "--db", url],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["r.db"], argv
    assert files(f) == before
    with sqlite3.connect(f) as c:  # still WAL
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# ------------------------------------------------------------------------ PostgreSQL
@pytest.fixture
def pg_schema(pg_server: PgServer) -> Iterator[tuple[str, str]]:
    """(URL, schema) of a fresh schema; pg_url's recipe, with the schema's name at hand."""
    import uuid

    name = f"f_{uuid.uuid4().hex[:12]}"
    pg_server.admin(f"CREATE SCHEMA {name}", dbname=TEST_DB)
    try:
        yield f"{pg_server.url(TEST_DB)}?options=-csearch_path%3D{name}", name
    finally:
        pg_server.admin(f"DROP SCHEMA IF EXISTS {name} CASCADE", dbname=TEST_DB)


def _pg(server: PgServer, schema: str, sql: str) -> list[tuple[object, ...]]:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=server.port, user="postgres", dbname=TEST_DB,
                         autocommit=True) as conn:
        conn.execute(f"SET search_path = {schema}")
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description else []


def _catalog(server: PgServer, schema: str) -> list[tuple[object, ...]]:
    """Every relation, column and row of the schema (the rows of its small tables)."""
    cols = _pg(server, schema, "SELECT c.relname, c.relkind, a.attname, a.atttypid FROM "
               "pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_attribute"
               f" a ON a.attrelid = c.oid AND a.attnum > 0 WHERE n.nspname = '{schema}' "
               "ORDER BY 1, 3")
    rows: list[tuple[object, ...]] = []
    for (table,) in _pg(server, schema, "SELECT tablename FROM pg_tables WHERE schemaname = "
                        f"'{schema}' ORDER BY 1"):
        rows += [(table, *r) for r in _pg(server, schema, f"SELECT * FROM {table} ORDER BY 1")]
    return cols + rows


@pytest.mark.postgres
@pytest.mark.parametrize("case", ["foreign_sweeps_table", "other_apps_alembic"])
def test_postgres_schema_of_another_app_is_one_line_and_untouched(
        case: str, pg_server: PgServer, pg_schema: tuple[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    url, schema = pg_schema
    if case == "foreign_sweeps_table":
        _pg(pg_server, schema, "CREATE TABLE sweeps (id serial PRIMARY KEY, broom text)")
        _pg(pg_server, schema, "INSERT INTO sweeps (broom) VALUES ('birch')")
        found = "sweeps"
    else:
        _pg(pg_server, schema, "CREATE TABLE alembic_version (version_num varchar(32) "
                               "PRIMARY KEY)")
        _pg(pg_server, schema, "INSERT INTO alembic_version VALUES ('ae1027a6acf')")
        _pg(pg_server, schema, "CREATE TABLE users (id serial PRIMARY KEY, name text)")
        found = "ae1027a6acf"
    before = _catalog(pg_server, schema)
    for argv in (["db", "upgrade"], ["status"], ["runs"]):
        code, _, err = cli(capsys, *argv, "--db", url)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        assert found in err and "another tool" in err, (argv, err)
    with pytest.raises(results_db.DBForeign):
        results_db.open(url)
    assert _catalog(pg_server, schema) == before


@pytest.mark.postgres
def test_postgres_from_a_newer_gatesweep_is_read_with_a_warning_not_written(
        pg_server: PgServer, pg_schema: tuple[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    url, schema = pg_schema
    results_db.upgrade(url)
    _pg(pg_server, schema, f"UPDATE alembic_version SET version_num = '{FUTURE}'")
    before = _catalog(pg_server, schema)
    code, _, err = cli(capsys, "db", "upgrade", "--db", url)
    assert code == 2 and err.count("\n") == 1 and FUTURE in err and "newer" in err, err
    code, _, err = cli(capsys, "status", "--db", url)
    assert code == 0 and "warning" in err and FUTURE in err, err
    with pytest.raises(results_db.DBNewer):
        results_db.open(url)
    assert _catalog(pg_server, schema) == before
