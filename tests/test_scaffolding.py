"""Test scaffolding stays out of the product packages: synthetic-DB builders, the
load generator, the throwaway PostgreSQL server and fault injectors live in tests/support/,
and no product module reads a test-only switch (the disk-full injector used to run on every
writer transaction, behind $GATESWEEP_TEST_DB_FULL)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("contract", "trainer", "results_db", "orchestrator", "dashboard")
MOVED = ("results_db/synth.py", "results_db/loadgen.py", "results_db/pgtemp.py",
         "dashboard/sample.py", "results_db/write/counters.py")


def test_scaffolding_modules_live_in_tests_support() -> None:
    assert not [m for m in MOVED if (ROOT / m).exists()]
    for name in ("synth", "loadgen", "pgtemp", "dashboard_sample", "dbfaults", "sqlcounter",
                 "migrations"):
        assert (ROOT / "tests" / "support" / f"{name}.py").is_file(), name


def test_no_product_module_reads_a_test_switch() -> None:
    found = []
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(ROOT)}:{n.lineno}: {n.value}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and n.value.startswith("GATESWEEP_TEST")]
            found += [f"{path.relative_to(ROOT)}:{n.lineno}: import {n.module}"
                      for n in ast.walk(tree)
                      if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tests")]
    assert not found, found


# The synthetic-DB builders: one core, tests.support.synthdb, registers every run by
# the submit path; the scenario modules only hold data. A builder that called register_runs
# itself would store made-up fingerprints and configs no sweep file can produce.
BUILDERS = ("tests/support/synth.py", "tests/support/dashboard_sample.py",
            "tests/dashboard_edge_dbs.py", "tests/sample_db.py")


def test_builders_register_only_through_synthdb() -> None:
    for rel in BUILDERS:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        calls = [n.lineno for n in ast.walk(tree)
                 if isinstance(n, ast.Attribute) and n.attr == "register_runs"]
        assert not calls, f"{rel}: register_runs at lines {calls}"
        assert any(isinstance(n, ast.ImportFrom) and n.module == "tests.support"
                   and any(a.name == "synthdb" for a in n.names) for n in ast.walk(tree)), rel


def test_synthdb_registers_real_runspecs_and_plays_each_end(tmp_path: Path) -> None:
    import results_db
    from contract.config import RunSpec
    from tests.support import synthdb

    db = results_db.open(f"sqlite:///{tmp_path / 's.db'}")
    spec = {"name": "t", "base": {"model": {"preset": "tiny"}, "train": {"lr": 1.0e-3}},
            "variants": {"baseline": {}, "g1": {"gate.position": "G1"}},
            "axes": {"train.lr": [1.0e-3, 3.0e-5]}, "seeds": [0],
            "exclude": [{"variant": "g1", "train.lr": 3.0e-5}]}
    regs = synthdb.register(db, spec, labels={"g1": "G1 *gate*"})
    assert [r.run.name for r in regs] == ["baseline-lr1e-3-s0", "baseline-lr3e-5-s0",
                                          "G1 *gate*-lr1e-3-s0"]
    assert [r.row.variant for r in regs] == ["baseline", "baseline", "G1 *gate*"]
    assert regs[1].run.spec.train.lr == 3e-5  # the YAML kept a small float a float
    for r in regs:  # the stored config is the RunSpec the plan validated, fingerprint and all
        assert r.row.fingerprint == RunSpec.model_validate(r.row.config).fingerprint()
    assert regs[0].row.params_gates == 0 < (regs[2].row.params_gates or 0)
    assert regs[0].row.dims["lr"] != regs[1].row.dims["lr"]

    ends = ("failed", "running", "succeeded")
    for r, end in zip(regs, ends, strict=True):
        att = synthdb.play(db, r.id, end, points=[(1, "train/loss", 2.0)],
                           summaries=None if end == "running" else {"val/ppl": 5.0})
        assert att is not None
    runs = db.runs(sweep="t", with_config=False)
    assert dict(zip(runs["name"], runs["status"], strict=True)) == {
        r.run.name: end for r, end in zip(regs, ends, strict=True)}
    # summaries where given (a run may fail after its final evaluation); points everywhere
    assert db.summaries(sweep="t")["run_id"].to_list() == [regs[0].id, regs[2].id]
    assert sorted(set(db.metrics([r.id for r in regs])["run_id"])) == sorted(r.id for r in regs)
    # registering the same file again is submit's dedupe: the finished run is cached
    again = synthdb.register(db, spec, labels={"g1": "G1 *gate*"})
    assert [r.id for r in again] == [r.id for r in regs]
    row = db.run(regs[0].id)
    assert row is not None and row.status == "pending"  # failed: queued again
    assert synthdb.play(db, regs[0].id, "pending") is None
    db.close()


def test_synth_splits_big_sweeps_into_files_and_cuts_the_grid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep over expand's cap is several files of one name; the last variant is cut to
    the run count (LR-major, seed-minor) by exclude rules."""
    import results_db
    from tests.support import synth

    monkeypatch.setattr(synth, "MAX_RUNS", 8)  # 2 variants x 2 LRs x 2 seeds per file
    db = results_db.open(f"sqlite:///{tmp_path / 's.db'}")
    regs = synth.register(db, 19, seeds=2, lrs=(1e-3, 2e-2))
    names = [r.run.name for r in regs]
    assert len(names) == len(set(names)) == 19
    assert names[:4] == ["baseline-lr1e-3-s0", "baseline-lr1e-3-s1", "baseline-lr2e-2-s0",
                         "baseline-lr2e-2-s1"]
    assert names[16:] == ["sdpa_additive_silu-lr1e-3-s0", "sdpa_additive_silu-lr1e-3-s1",
                          "sdpa_additive_silu-lr2e-2-s0"]
    assert db.runs(sweep="synth", with_config=False).height == 19
    # a repeat of the grid is a variant of its own with its own config
    big = synth.register(db, 45, seeds=2, lrs=(1e-3, 2e-2))
    assert big[40].run.variant == "baseline_r1"
    assert big[40].run.spec.model.rope_base != big[0].run.spec.model.rope_base
    db.close()


def test_add_finished_run_is_one_new_run_of_its_sweep(tmp_path: Path) -> None:
    import results_db
    from contract.config import RunSpec
    from tests.support.synth import add_finished_run, gate_config

    db = results_db.open(f"sqlite:///{tmp_path / 's.db'}")
    sid = db.ensure_sweep("one")
    rid = add_finished_run(db, sid, "odd | name", 1, gate_config([{"position": "G2"}], seed=1),
                           status="failed", summaries={"val/ppl": 4.0})
    row = db.run(rid)
    assert row is not None and (row.name, row.variant, row.status) == (
        "odd | name-s1", "odd | name", "failed")
    assert RunSpec.model_validate(row.config).model.gates[0].position == "G2"
    assert db.summaries([rid])["value"].to_list() == [4.0]
    with pytest.raises(ValueError, match="registered already"):  # an equal config: same run
        add_finished_run(db, sid, "other", 1, gate_config([{"position": "G2"}], seed=1))
    db.close()


def test_cliproc_runs_the_cli_as_python_m_does(tmp_path: Path) -> None:
    """tests/support/cliproc.py forks the CLI from a server that imported it: the exit code,
    stdout and stderr are those of a fresh `python -m orchestrator` (a success, a user error,
    a usage error), and a call past its timeout is killed with TimeoutExpired."""
    import os
    import subprocess
    import sys

    from tests.support import cliproc

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nbase: {model: {preset: nope}}\n")
    env = {**os.environ, "COLUMNS": "200"}
    for args in (["validate", str(ROOT / "sweeps" / "smoke.yaml")], ["validate", str(bad)],
                 ["nosuchcmd"]):
        fresh = subprocess.run([sys.executable, "-m", "orchestrator", *args], env=env,
                               capture_output=True, text=True, timeout=120)
        forked = cliproc.run(*args, timeout=120, env=env)
        assert (forked.returncode, forked.stdout, forked.stderr) == (
            fresh.returncode, fresh.stdout, fresh.stderr), args
    import results_db

    url = f"sqlite:///{tmp_path / 'r.db'}"
    results_db.open(url).close()
    endless = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
               "SELECT count(*) FROM c")
    with pytest.raises(subprocess.TimeoutExpired):  # a query that never ends: killed
        cliproc.run("query", endless, "--db", url, timeout=1)
