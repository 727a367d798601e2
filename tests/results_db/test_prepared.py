"""results_db/write/prepared.py on SQLite and PostgreSQL: a statement compiled once per dialect
writes what SQLAlchemy's own execution of it writes -- the types' bind processors applied
(UTC datetimes, JSON), constant IN lists compiled in, batches -- and a missing value is an
error naming it, not a NULL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import insert, select, update

import results_db
from results_db.schema.tables import Artifact, Run
from results_db.write.prepared import Prepared, arg

_RENAME = Prepared(lambda: update(Run).where(Run.id == arg("run_id"),
                                             Run.status.in_(["pending", "failed"]))
                   .values(owner=arg("owner"), updated=arg("now")))
_ARTIFACT = Prepared(lambda: insert(Artifact).values(
    {k: arg(k) for k in ("run_id", "attempt_id", "kind", "path", "data", "created")}))


def _run(db) -> int:
    sid = db.ensure_sweep("s")
    new = results_db.NewRun(name="r", fingerprint="fp-r", variant="v", seed=0, config={})
    return db.register_runs(sid, [new]).to_run[0].id


def test_a_prepared_statement_writes_what_sqlalchemy_would(db_url):
    db = results_db.open(db_url)
    rid = _run(db)
    # an aware local time: UTCDateTime's processor stores it as naive UTC, as the ORM does
    when = datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone(timedelta(hours=2)))
    with db.engine.begin() as c:
        assert _RENAME.run(c, {"run_id": rid, "owner": "me", "now": when}).rowcount == 1
        # the compiled-in IN list is kept: a running run does not match
        c.execute(update(Run).where(Run.id == rid).values(status="running"))
        assert _RENAME.run(c, {"run_id": rid, "owner": "you", "now": when}).rowcount == 0
        _ARTIFACT.run(c, [{"run_id": rid, "attempt_id": None, "kind": "k", "path": None,
                           "data": {"a": [1, 2.5, None]}, "created": when},
                          {"run_id": rid, "attempt_id": None, "kind": "k", "path": "/p",
                           "data": None, "created": when}])
    row = db.run(rid)
    assert row.owner == "me"
    with db.engine.connect() as c:
        updated = c.execute(select(Run.updated).where(Run.id == rid)).scalar_one()
        arts = c.execute(select(Artifact.path, Artifact.data, Artifact.created)
                         .where(Artifact.run_id == rid).order_by(Artifact.id)).all()
    utc = when.astimezone(timezone.utc)
    assert updated.replace(tzinfo=timezone.utc) == utc
    assert [(p, d) for p, d, _ in arts] == [(None, {"a": [1, 2.5, None]}), ("/p", None)]
    assert all(t.replace(tzinfo=timezone.utc) == utc for _, _, t in arts)
    db.close()


def test_a_missing_value_is_an_error_naming_it(sqlite_url):
    db = results_db.open(sqlite_url)
    rid = _run(db)
    with db.engine.begin() as c, pytest.raises(TypeError, match="missing value.*owner"):
        _RENAME.run(c, {"run_id": rid, "now": datetime.now(timezone.utc)})
    assert db.run(rid).owner in (None, "")
    db.close()
