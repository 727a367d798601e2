"""A field retired from the RunSpec (train.fail_at_step) changes no fingerprint, and
migration 0005 takes it out of a DB written before, so its runs read back as RunSpecs."""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest
import sqlalchemy as sa  # results_db's tests may speak SQL: they test the SQL owner

import results_db
from contract.config import RunSpec
from contract.identity import fingerprint, group_keys

# Computed by the code before the field went (commit fe7ec47), for PIN_SPEC: a changed value
# means every stored run lost its cache hit and every checkpoint its resume. The runs of that
# code were initialised by the legacy scheme (model.init, added later, keeps their fingerprint).
PIN_SPEC = {"name": "r", "sweep": "pin", "seed": 0, "model": {"preset": "tiny", "init": "legacy"},
            "train": {"steps": 10, "warmup": 1}}
PIN_FINGERPRINT = "f05f0fa264414110ecf1306a8130d85d09fa3ce7b7784e8b001f3dcbd03e3d60"
PIN_GROUP_KEYS = ("42042b583e91122a", "ced4d54fe639c37c")


def _old_config(fail_at_step: int | None, seed: int = 0) -> dict[str, Any]:
    """The stored JSON of a RunSpec as the code before the retirement wrote it."""
    cfg = RunSpec.model_validate({**PIN_SPEC, "seed": seed}).model_dump(mode="json")
    cfg["train"]["fail_at_step"] = fail_at_step
    return cfg


def test_the_fingerprint_and_group_keys_are_what_they_were() -> None:
    cfg = RunSpec.model_validate(PIN_SPEC).model_dump(mode="json")
    assert "fail_at_step" not in cfg["train"]
    assert RunSpec.model_validate(PIN_SPEC).fingerprint() == PIN_FINGERPRINT
    assert group_keys(cfg) == PIN_GROUP_KEYS
    assert fingerprint(_old_config(None)) == PIN_FINGERPRINT  # a stored old config: same run
    assert fingerprint(_old_config(25)) != PIN_FINGERPRINT  # a fault-injected one never was


def test_the_runspec_refuses_the_retired_key() -> None:
    with pytest.raises(pydantic.ValidationError, match="fail_at_step"):
        RunSpec.model_validate({**PIN_SPEC, "train": {"steps": 10, "warmup": 1,
                                                      "fail_at_step": 5}})


def _insert_run(conn: sa.Connection, rid: int, cfg: dict[str, Any]) -> None:
    conn.execute(sa.text(
        "INSERT INTO runs (id, sweep_id, name, fingerprint, variant, seed, status, config, "
        "n_gates, group_key, lr_group_key, created, updated) VALUES (:id, 1, :name, :fp, "
        "'base', :seed, 'failed', :cfg, 0, :g, :lg, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
        {"id": rid, "name": f"r{rid}", "fp": fingerprint(cfg), "seed": cfg["seed"],
         "cfg": json.dumps(cfg), "g": group_keys(cfg)[0], "lg": group_keys(cfg)[1]})
    conn.execute(sa.text(
        "INSERT INTO attempts (run_id, number, status, started, host, error, fault) VALUES "
        "(:id, 1, 'failed', CURRENT_TIMESTAMP, 'h', 'RuntimeError: injected failure', :f)"),
        {"id": rid, "f": "injected" if cfg["train"]["fail_at_step"] else "oom"})


def test_migration_0005_strips_the_key_and_keeps_the_fingerprints(db_url: str) -> None:
    url = db_url  # SQLite stores JSON as text, PostgreSQL as json: the migration reads both
    results_db.upgrade(url, revision="0004_group_keys")
    eng = sa.create_engine(url)
    plain, injected = _old_config(None), _old_config(25, seed=1)
    with eng.begin() as conn:
        conn.execute(sa.text("INSERT INTO sweeps (id, name, spec, description, created) "
                             "VALUES (1, 'pin', '', '', CURRENT_TIMESTAMP)"))
        _insert_run(conn, 1, plain)
        _insert_run(conn, 2, injected)
    eng.dispose()

    results_db.upgrade(url)
    with results_db.open(url, readonly=True) as db:
        rows = {int(r["id"]): r for r in db.runs("pin").iter_rows(named=True)}
        faults = {rid: [a.fault for a in db.attempts(rid)] for rid in rows}
    for rid, row in rows.items():
        cfg = json.loads(row["config"])
        assert "fail_at_step" not in cfg["train"], rid
        spec = RunSpec.model_validate(cfg)  # reads back (rerun, evaluate, the analysis API)
        assert (row["group_key"], row["lr_group_key"]) == group_keys(cfg), rid
        if rid == 1:
            assert row["fingerprint"] == spec.fingerprint() == PIN_FINGERPRINT
    # the injected run keeps its stored (unique) fingerprint; its seed group is the plain one's
    assert rows[2]["fingerprint"] == fingerprint(injected)
    assert rows[2]["group_key"] == rows[1]["group_key"]
    assert faults == {1: ["oom"], 2: ["code_error"]}  # `injected` is no fault class any more
