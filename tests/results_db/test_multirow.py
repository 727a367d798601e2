"""results_db/write/multirow.py on SQLite and PostgreSQL: one batch of any size upserts every row
with its values as given -- NULLs, ints in a float column, 64-bit ints, a second batch that
updates -- past SQLite's parameter limit (chunks) and in one statement on PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, event

from results_db.write.multirow import SQLITE_MAX_PARAMS, execute_rows

_SQL = ("INSERT INTO t (k, name, v, big) {values} "
        "ON CONFLICT (k) DO UPDATE SET v = excluded.v, name = excluded.name")
_TYPES = ("int8", "text", "float8", "int8")


def test_a_batch_upserts_every_row_as_given(db_url):
    eng = create_engine(db_url)
    statements: list[str] = []
    event.listen(eng, "before_cursor_execute", lambda conn, cur, sql, *a: statements.append(sql))
    n = SQLITE_MAX_PARAMS  # 4 values a row: several SQLite chunks
    rows = [(i, None if i % 7 == 0 else f"n{i}", None if i % 5 == 0 else (i if i % 2 else i / 4),
             2**40 + i) for i in range(n)]
    with eng.begin() as c:
        c.exec_driver_sql("DROP TABLE IF EXISTS t")
        c.exec_driver_sql("CREATE TABLE t (k BIGINT PRIMARY KEY, name TEXT, "
                          "v DOUBLE PRECISION, big BIGINT)")
        statements.clear()
        execute_rows(c, _SQL, rows, _TYPES)
        inserts = len(statements)
        execute_rows(c, _SQL, [(3, "again", 0.5, 0), (4, "twice", None, 0)], _TYPES)
        got = {r[0]: tuple(r[1:]) for r in c.exec_driver_sql("SELECT k, name, v, big FROM t")}
        c.exec_driver_sql("DROP TABLE t")
    eng.dispose()
    expected_inserts = 1 if eng.dialect.name == "postgresql" else -(-n // (SQLITE_MAX_PARAMS // 4))
    assert inserts == expected_inserts
    want = {k: (name, None if v is None else float(v), big) for k, name, v, big in rows}
    want[3], want[4] = ("again", 0.5, want[3][2]), ("twice", None, want[4][2])
    assert got == want


def test_each_value_needs_a_column_type(db_url):
    eng = create_engine(db_url)
    with eng.begin() as c, pytest.raises(ValueError, match="3 values per row, 4 column types"):
        execute_rows(c, _SQL, [(1, "a", 1.0)], _TYPES)
    eng.dispose()
