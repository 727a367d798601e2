"""A run stored before model.init existed reruns as what it trained: its config reads back as
legacy initialisation (RunSpec.from_stored), with the fingerprint its row and checkpoint
markers hold -- not as today's paired default under a fingerprint that no longer matches."""

from __future__ import annotations

import pytest

import results_db
from contract.config import RunSpec
from orchestrator.run.driver.rerun import stored_spec
from results_db.rows import NewRun


@pytest.fixture
def db(tmp_path):
    d = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    yield d
    d.close()


def test_an_old_stored_config_reruns_as_legacy_under_its_fingerprint(db) -> None:
    spec = RunSpec(name="old", sweep="s", seed=3, model={"preset": "tiny",
                                                         "gates": [{"position": "G1"}]})
    config = spec.model_dump(mode="json")
    del config["model"]["init"]  # as every run registered before the field was stored
    legacy = spec.model_copy(update={"model": spec.model.model_copy(update={"init": "legacy"})})
    run = NewRun("old", legacy.fingerprint(), "g1", 3, config)
    row = db.run(db.register_runs(db.ensure_sweep("s"), [run]).to_run[0].id)
    assert row is not None
    again = stored_spec(row, "s")
    assert again.model.init == "legacy" and again == legacy
    assert again.fingerprint() == row.fingerprint != spec.fingerprint()
