"""The mixing check names the initialisation scheme (results_db/analysis/mixing.py): a sweep
whose compared runs were initialised by paired and legacy init says so, and a run stored
before model.init existed (its config has no such field) counts as legacy. SQLite and
PostgreSQL (the scheme is read from the stored config's JSON)."""

from __future__ import annotations

import polars as pl
import pytest

import results_db
from contract.config import RunSpec
from results_db.analysis.mixing import INIT, code_mix
from results_db.rows import NewRun
from tests.support.synthdb import play, register


@pytest.fixture
def db(db_url: str):
    d = results_db.open(db_url)
    yield d
    d.close()


def _stored_before_init(db: results_db.ResultsDB, sweep: str, seed: int) -> int:
    """A run registered as a DB from before model.init holds it: the config without it."""
    spec = RunSpec(name=f"old-{seed}", sweep=sweep, seed=seed, model={"preset": "tiny"})
    config = spec.model_dump(mode="json")
    config["model"].pop("init")
    run = NewRun(spec.name, spec.fingerprint(), "baseline", seed, config)
    res = db.register_runs(db.ensure_sweep(sweep), [run])
    return res.to_run[0].id


def test_one_scheme_is_not_mixed(db) -> None:
    regs = register(db, {"name": "one", "base": {"model": {"preset": "tiny"}},
                         "variants": {"baseline": {}, "g1": {"gate.position": "G1"}},
                         "seeds": [0, 1]})
    for r in regs:
        play(db, r.id)
    mix = db.code_mix("one")
    assert INIT not in mix.differing and mix.sentence is None


def test_paired_and_legacy_runs_compared_are_named(db) -> None:
    regs = register(db, {"name": "mixed", "base": {"model": {"preset": "tiny"}},
                         "variants": {"baseline": {}, "g1": {"gate.position": "G1"},
                                      "g1_legacy": {"gate.position": "G1",
                                                    "model.init": "legacy"}},
                         "seeds": [0, 1]})
    old = _stored_before_init(db, "mixed", 7)
    for rid in [r.id for r in regs] + [old]:
        play(db, rid)
    mix = db.code_mix("mixed")
    assert mix.mixed and mix.differing[INIT] == [("paired", 4), ("legacy", 3)]
    assert mix.sentence == (
        "Mixed initialisation: the 7 runs compared were initialised by 2 initialisation "
        "schemes (model.init) (paired: 4 runs; legacy: 3 runs; a run stored without model.init "
        "is legacy), so their seeds do not start from the same weights and a difference "
        "between them may come from the initialisation, not the variants.")


def test_the_init_sentence_comes_before_the_provenance_one() -> None:
    runs = pl.DataFrame({"run_id": [1, 2], INIT: [None, "paired"]})
    latest = pl.DataFrame({"run_id": [1, 2], "code_version": ["a" * 40, "b" * 40],
                           "python": ["3.11"] * 2, "torch": ["2.13"] * 2,
                           "deepspeed": ["0.19"] * 2, "accelerator": ["cpu"] * 2,
                           "n_code_versions": [1, 1]})
    mix = code_mix(runs, latest)
    assert set(mix.differing) == {INIT, "code_version"}
    assert mix.differing[INIT] == [("legacy", 1), ("paired", 1)]
    assert mix.sentence is not None
    assert mix.sentence.startswith("Mixed initialisation: the 2 runs compared")
    assert "Mixed provenance: the 2 runs compared were trained by 2 code versions" in \
        mix.sentence
