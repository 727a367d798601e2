"""A newer gatesweep's DB whose layout lacks what this gatesweep reads is one line, not a crash.

A DB at a schema revision this code does not know, with our core tables, is a newer gatesweep's
and is read with a warning (test_foreign_dbs.py). When the newer layout has dropped or renamed a
table or column this code reads (here ``provenance``, or ``attempts.fault``), reading it "anyway"
raised SQLAlchemy's "no such table: provenance" traceback from ``leaderboard``, ``show``,
``table``, ``findings`` and ``effects``. Every read command now says in one line that the DB is
a newer gatesweep's and what it lacks, and changes no byte of it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

import results_db
from tests.db_fixtures import PgServer
from tests.results_db.test_foreign_dbs import FUTURE, _pg, cli, files, pg_schema
from tests.support import smokedb

__all__ = ["pg_schema"]  # the fixture, used here by name

READS = (["leaderboard", "smoke"], ["show", "1"], ["table", "smoke"], ["findings", "smoke"],
         ["effects", "smoke"], ["status"], ["runs"])


def _newer_without(path: Path, *changes: str) -> str:
    url = smokedb.fill(f"sqlite:///{path}")
    with contextlib.closing(sqlite3.connect(path)) as c:
        c.execute("UPDATE alembic_version SET version_num = ?", (FUTURE,))
        for sql in changes:
            c.execute(sql)
        c.commit()
        c.execute("PRAGMA journal_mode=DELETE")  # no -wal/-shm: any switch would show
    return url


@pytest.mark.parametrize(("change", "lacks"), [
    ("DROP TABLE provenance", "table provenance"),
    ("ALTER TABLE attempts DROP COLUMN fault", "column attempts.fault"),
])
def test_sqlite_newer_layout_is_one_line_on_every_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, lacks: str) -> None:
    f = tmp_path / "r.db"
    url = _newer_without(f, change)
    before = files(f)
    for argv in READS:
        code, out, err = cli(capsys, *argv, "--db", url)
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        assert err.startswith("error: ") and FUTURE in err and "newer gatesweep" in err, err
        assert lacks in err and "upgrade gatesweep" in err, (argv, err)
    with pytest.raises(results_db.DBNewer, match="lacks"):
        results_db.open(url, readonly=True)
    assert files(f) == before


def test_sqlite_newer_layout_with_everything_we_read_is_still_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A newer gatesweep that only added (a table, a column) keeps the read-with-a-warning."""
    url = _newer_without(tmp_path / "r.db", "CREATE TABLE later_things (id INTEGER)",
                         "ALTER TABLE runs ADD COLUMN later_column TEXT")
    code, out, err = cli(capsys, "leaderboard", "smoke", "--db", url)
    assert code == 0 and "warning" in err and FUTURE in err and "lacks" not in err, err


@pytest.mark.postgres
def test_postgres_newer_layout_is_one_line(
        pg_server: PgServer, pg_schema: tuple[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    url, schema = pg_schema
    smokedb.fill(url)
    _pg(pg_server, schema, f"UPDATE alembic_version SET version_num = '{FUTURE}'")
    _pg(pg_server, schema, "DROP TABLE provenance")
    code, _, err = cli(capsys, "leaderboard", "smoke", "--db", url)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert FUTURE in err and "table provenance" in err, err
