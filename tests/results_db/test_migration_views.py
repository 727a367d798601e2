"""Migration 0009_summary_dims: the ``run_summary`` view carries every run dimension of
contract/dimensions.py, so SQL groups by any of them; a dimension added later without a view
revision fails the first test. The downgrade restores 0001's view and ``leaderboard`` reads
``run_summary`` at both revisions."""

from __future__ import annotations

import sqlalchemy as sa  # results_db's tests may speak SQL: they test the SQL owner

import results_db
from contract.config import RunSpec
from contract.dimensions import COLUMNS
from results_db.rows import NewRun
from tests.support.migrations import downgrade_engine

BEFORE = "0008_nsa"
ADDED = {"nsa", "clip_residual", "qk_norm", "steps"}  # not in 0001's view


def _view_columns(eng: sa.Engine) -> set[str]:
    return {c["name"] for c in sa.inspect(eng).get_columns("run_summary")}


def test_run_summary_lists_every_run_dimension(db_url: str) -> None:
    results_db.upgrade(db_url)
    eng = sa.create_engine(db_url)
    try:
        missing = set(COLUMNS) - _view_columns(eng)
    finally:
        eng.dispose()
    assert not missing, f"run_summary lacks {sorted(missing)}: add a view revision"


def test_the_view_groups_by_nsa_and_the_downgrade_restores_0001s(db_url: str) -> None:
    results_db.upgrade(db_url, revision=BEFORE)
    eng = sa.create_engine(db_url)
    assert not ADDED & _view_columns(eng)
    eng.dispose()

    results_db.upgrade(db_url)
    specs = [RunSpec.model_validate({"name": n, "sweep": "v", "seed": 0, "train": {"steps": 70},
                                     "model": {"preset": "tiny", **m}})
             for n, m in (("dense", {}), ("nsa_equal", {"nsa": {"combine": "equal"}}),
                          ("qk", {"qk_norm": True}))]
    with results_db.open(db_url) as db:
        sweep = db.ensure_sweep("v")
        db.register_runs(sweep, [NewRun(s.name, s.fingerprint(), s.name, 0,
                                        s.model_dump(mode="json")) for s in specs])
        got = db.query("SELECT name, nsa, qk_norm, steps FROM run_summary ORDER BY name")
        board = db.query("SELECT COUNT(*) AS n FROM leaderboard")
    assert got.to_dicts() == [
        {"name": "dense", "nsa": None, "qk_norm": False, "steps": 70},
        {"name": "nsa_equal", "nsa": "equal", "qk_norm": False, "steps": 70},
        {"name": "qk", "nsa": None, "qk_norm": True, "steps": 70}]
    assert board["n"].to_list() == [0]  # no finished run yet; the view reads the new one

    eng = sa.create_engine(db_url)
    try:
        downgrade_engine(eng, BEFORE)
        assert not ADDED & _view_columns(eng)
        with eng.connect() as conn:
            names = conn.execute(sa.text("SELECT name FROM run_summary ORDER BY name")).scalars()
            assert list(names) == ["dense", "nsa_equal", "qk"]
            assert conn.execute(sa.text("SELECT COUNT(*) FROM leaderboard")).scalar_one() == 0
    finally:
        eng.dispose()
