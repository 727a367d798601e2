"""Migration 0008_nsa: the run dimension ``nsa`` (contract/dimensions.py). Runs stored before it
read back NULL (dense attention, which they all had), a run registered after it carries its NSA
branch combination, and the column groups runs in SQL; the downgrade takes it out again."""

from __future__ import annotations

import json

import sqlalchemy as sa  # results_db's tests may speak SQL: they test the SQL owner

import results_db
from contract.config import RunSpec
from contract.identity import fingerprint, group_keys
from results_db.rows import NewRun
from tests.support.migrations import downgrade_engine

BEFORE = "0007_decide_records"


def _spec(name: str, **model: object) -> RunSpec:
    return RunSpec.model_validate({"name": name, "sweep": "nsa", "seed": 0,
                                   "model": {"preset": "tiny", **model}})


def test_old_runs_are_dense_and_new_ones_carry_their_combination(db_url: str) -> None:
    results_db.upgrade(db_url, revision=BEFORE)
    eng = sa.create_engine(db_url)
    old = _spec("old").model_dump(mode="json")
    del old["model"]["nsa"]  # as the code before model.nsa stored it
    with eng.begin() as conn:
        assert "nsa" not in {c["name"] for c in sa.inspect(conn).get_columns("runs")}
        conn.execute(sa.text("INSERT INTO sweeps (name, spec, description, created) "
                             "VALUES ('nsa', '', '', CURRENT_TIMESTAMP)"))
        sweep = conn.execute(sa.text("SELECT id FROM sweeps WHERE name = 'nsa'")).scalar_one()
        conn.execute(sa.text(
            "INSERT INTO runs (sweep_id, name, fingerprint, variant, seed, status, config, "
            "n_gates, group_key, lr_group_key, created, updated) VALUES (:sweep, 'old', :fp, "
            "'baseline', 0, 'succeeded', :cfg, 0, :g, :lg, CURRENT_TIMESTAMP, "
            "CURRENT_TIMESTAMP)"),
            {"sweep": sweep, "fp": fingerprint(old), "cfg": json.dumps(old),
             "g": group_keys(old)[0], "lg": group_keys(old)[1]})
    eng.dispose()

    results_db.upgrade(db_url)
    with results_db.open(db_url) as db:
        new = [_spec(f"nsa_{c}", nsa={"combine": c}) for c in ("equal", "gated")]
        new.append(_spec("nsa_window8", nsa={"window": 8}))  # gated: the default
        db.register_runs(sweep, [NewRun(s.name, s.fingerprint(), s.name, 0,
                                    s.model_dump(mode="json")) for s in new])
        rows = {r["name"]: r["nsa"] for r in db.runs("nsa").iter_rows(named=True)}
        grouped = db.query("SELECT nsa, COUNT(*) AS n FROM runs GROUP BY nsa ORDER BY nsa")
        assert RunSpec.from_stored(old).fingerprint() == fingerprint(old)  # the same run
    assert rows == {"old": None, "nsa_equal": "equal", "nsa_gated": "gated",
                    "nsa_window8": "gated"}
    assert dict(zip(grouped["nsa"], grouped["n"])) == {None: 1, "equal": 1, "gated": 2}

    eng = sa.create_engine(db_url)
    downgrade_engine(eng, BEFORE)
    assert "nsa" not in {c["name"] for c in sa.inspect(eng).get_columns("runs")}
    eng.dispose()
