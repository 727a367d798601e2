"""Provenance per attempt in the results DB (results_db/write/provenance.py, migration
0006_provenance), on SQLite and PostgreSQL: stored and read back per attempt and per run, one
clear error for a malformed document, queryable by SQL; and the mixing check
(results_db/analysis/mixing.py) on runs registered by the real submit path."""

from __future__ import annotations

import pytest

import results_db
from contract.provenance import FIELDS, short_key
from tests.support.synthdb import play, register

COMMIT_A, COMMIT_B = "a" * 40, "b" * 40


def _doc(commit: str = COMMIT_A, *, dirty: bool = False, torch: str = "2.13.0+cpu",
         accelerator: str = "cpu") -> dict:
    diff = "d" * 64 if dirty else None
    return {"source": "git", "git_commit": commit, "dirty": dirty, "diff_sha256": diff,
            "code_version": commit + (f"+{diff[:16]}" if diff else ""), "python": "3.11.7",
            "gatesweep": "0.1.0", "torch": torch, "deepspeed": "0.19.8", "ray": "2.60.0",
            "polars": "2.1.0", "sqlalchemy": "2.1.9", "accelerator": accelerator,
            "device_model": None, "device_count": 0, "cpu_model": "Xeon", "cpu_threads": 2,
            "world_size": 1, "deepspeed_config": {"zero_optimization": {"stage": 0}}}


def _sweep(db: results_db.ResultsDB, name: str = "mix") -> list[int]:
    regs = register(db, {"name": name, "base": {"model": {"preset": "tiny"}},
                         "variants": {"baseline": {}, "g1": {"gate.position": "G1"}},
                         "seeds": [0, 1]})
    return [r.id for r in regs]


def _attempt(db: results_db.ResultsDB, run_id: int, doc: dict | None,
             end: str = "succeeded") -> int:
    att = db.start_attempt(run_id, host="h")
    if doc is not None:
        db.record_provenance(run_id, att.id, doc)
    db.finish_attempt(att.id, end) if end != "running" else None
    return att.id


@pytest.fixture
def db(db_url: str):
    d = results_db.open(db_url)
    yield d
    d.close()


def test_stored_per_attempt_read_back_and_replaced_on_a_retried_write(db) -> None:
    ids = _sweep(db)
    first = _attempt(db, ids[0], _doc(), end="failed")
    db.record_provenance(ids[0], first, _doc(COMMIT_B))  # a retried write replaces it
    _attempt(db, ids[0], _doc(COMMIT_A, dirty=True))  # the resumed attempt: other code
    every = db.provenance(run_ids=[ids[0]])
    assert every["attempt"].to_list() == [1, 2]
    assert every["git_commit"].to_list() == [COMMIT_B, COMMIT_A]
    assert every["dirty"].to_list() == [False, True]
    assert set(FIELDS) <= set(every.columns)
    latest = db.provenance(sweep="mix", latest=True)
    assert latest.height == 1 and latest["attempt"][0] == 2
    assert latest["n_code_versions"][0] == 2  # resumed on other code than it started with
    got = db.query("select a.number, p.code_version, p.torch from provenance p join attempts a "
                   "on a.id = p.attempt_id order by a.number")
    assert got.rows() == [(1, COMMIT_B, "2.13.0+cpu"), (2, COMMIT_A + "+" + "d" * 16,
                                                         "2.13.0+cpu")]


@pytest.mark.parametrize(("change", "message"), [
    ({"colour": "red"}, "unknown key(s) colour"),
    ({"code_version": ""}, "code_version must be given"),
    ({"device_count": "2"}, "device_count must be an integer"),
    ({"dirty": "yes"}, "dirty must be true/false"),
    ({"deepspeed_config": [1]}, "deepspeed_config must be a mapping"),
])
def test_a_malformed_document_is_one_error_and_writes_nothing(db, change: dict,
                                                              message: str) -> None:
    (rid, *_) = _sweep(db)
    att = db.start_attempt(rid, host="h")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        db.record_provenance(rid, att.id, {**_doc(), **change})
    assert db.provenance().height == 0


def test_runs_of_one_code_version_are_not_mixed(db) -> None:
    for rid in _sweep(db):
        _attempt(db, rid, _doc())
    mix = db.code_mix("mix")
    assert (mix.n_runs, mix.n_recorded, mix.mixed, mix.sentence) == (4, 4, False, None)


def test_a_comparison_across_commits_and_torch_versions_is_flagged(db) -> None:
    ids = _sweep(db)
    for rid in ids[:3]:
        _attempt(db, rid, _doc())
    _attempt(db, ids[3], _doc(COMMIT_B, torch="2.12.0"))
    mix = db.code_mix("mix")
    assert mix.mixed and set(mix.differing) == {"code_version", "torch"}
    assert mix.differing["code_version"] == [(short_key(COMMIT_A), 3), (short_key(COMMIT_B), 1)]
    assert mix.sentence == (
        "Mixed provenance: the 4 runs compared were trained by 2 code versions "
        "(aaaaaaaaaaaa: 3 runs; bbbbbbbbbbbb: 1 run) and 2 torch versions (2.13.0+cpu: 3 runs; "
        "2.12.0: 1 run), so a difference between them may come from the code or packages, not "
        "the variants (orchestrator report lists each run's).")


def test_a_dirty_tree_is_other_code_than_its_commit(db) -> None:
    ids = _sweep(db)
    for rid in ids[:2]:
        _attempt(db, rid, _doc())
    for rid in ids[2:]:
        _attempt(db, rid, _doc(dirty=True))
    mix = db.code_mix("mix")
    assert [v for v, _ in mix.differing["code_version"]] == [
        "aaaaaaaaaaaa", "aaaaaaaaaaaa+dirty dddddddd"]


def test_runs_without_provenance_make_the_answer_unknown_and_failed_runs_do_not_count(
        db) -> None:
    ids = _sweep(db)
    _attempt(db, ids[0], _doc())
    _attempt(db, ids[1], _doc())
    _attempt(db, ids[2], None)  # trained before provenance was recorded
    _attempt(db, ids[3], _doc(COMMIT_B), end="failed")  # not compared: no result
    mix = db.code_mix("mix")
    assert not mix.differing and mix.n_runs == 3 and mix.n_recorded == 2
    assert mix.sentence == (
        "Provenance: 1 of 3 runs compared recorded no provenance (trained before it was "
        "recorded), so whether they ran the same code is unknown (orchestrator report lists "
        "each run's).")
    assert results_db.open(db.url, readonly=True).code_mix("mix").sentence == mix.sentence


def test_runs_by_code_selects_other_and_unknown_code(db) -> None:
    ids = _sweep(db)
    _attempt(db, ids[0], _doc())
    _attempt(db, ids[1], _doc(COMMIT_B))
    _attempt(db, ids[2], None)
    play(db, ids[3], "failed")
    assert db.runs_by_code("mix", COMMIT_A) == ids[1:]
    assert db.runs_by_code("mix", COMMIT_A, states=["succeeded"]) == ids[1:3]
    assert db.runs_by_code("mix", COMMIT_B, states=["succeeded"]) == [ids[0], ids[2]]
