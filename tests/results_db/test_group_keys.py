"""Seed groups in the results DB follow the identity rule (contract/identity.py): runs that
differ only in resources.workers (another global batch) are two groups, not two seeds of one;
migration 0004 re-keys a DB written under the old rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import results_db
from contract.config import RunSpec
from contract.identity import group_keys
from results_db.rows import NewRun


def _config(workers: int, seed: int = 0) -> dict[str, Any]:
    return RunSpec.model_validate({
        "name": f"w{workers}-s{seed}", "sweep": "workers", "seed": seed,
        "model": {"preset": "tiny"}, "train": {"steps": 10, "warmup": 1},
        "resources": {"workers": workers}}).model_dump(mode="json")


def _add(db: Any, sid: int, workers: int, seed: int, ppl: float) -> int:
    cfg = _config(workers, seed)
    spec = RunSpec.model_validate(cfg)
    res = db.register_runs(sid, [NewRun(name=spec.name, fingerprint=spec.fingerprint(),
                                        variant="base", seed=seed, config=cfg)])
    run = res.to_run[0]
    att = db.start_attempt(run.id, host="test")
    db.log_summaries(run.id, att.id, {"val/ppl": ppl})
    db.finish_attempt(att.id, "succeeded")
    return run.id


def test_runs_differing_only_in_workers_are_not_pooled_as_seeds(sqlite_url: str) -> None:
    with results_db.open(sqlite_url) as db:
        sid = db.ensure_sweep("workers")
        _add(db, sid, 1, 0, 10.0)
        _add(db, sid, 2, 0, 20.0)
        board = db.leaderboard("workers")
    # before: one row, n = 2, mean 15 -- two batch sizes averaged as if they were seeds
    assert sorted(board["n"].to_list()) == [1, 1]
    assert sorted(board["mean"].to_list()) == pytest.approx([10.0, 20.0])


def test_migration_0004_rekeys_stored_runs(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    results_db.upgrade(url, revision="0003_rollup")
    import sqlalchemy as sa  # results_db's tests may speak SQL: they test the SQL owner

    eng = sa.create_engine(url)
    cfg = _config(2)
    with eng.begin() as conn:
        conn.execute(sa.text("INSERT INTO sweeps (id, name, spec, description, created) "
                             "VALUES (1, 'workers', '', '', CURRENT_TIMESTAMP)"))
        conn.execute(sa.text(
            "INSERT INTO runs (id, sweep_id, name, fingerprint, variant, seed, status, config, "
            "n_gates, group_key, lr_group_key, created, updated) VALUES (1, 1, 'r', 'fp', "
            "'base', 0, 'pending', :cfg, 0, 'old', 'old', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
            {"cfg": json.dumps(cfg)})
    eng.dispose()
    results_db.upgrade(url)
    with results_db.open(url, readonly=True) as db:
        row = db.runs("workers", columns=["group_key", "lr_group_key"]).row(0, named=True)
    assert (row["group_key"], row["lr_group_key"]) == group_keys(cfg)
