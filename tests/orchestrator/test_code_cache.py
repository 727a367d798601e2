"""What "already ran" means (docs/architecture.md, "Provenance and the sweep report"): a
sweep's ``cached_by`` (config, the default, or config_and_code) and ``rerun --sweep S
--code-other-than-current``, on a real SQLite DB with runs registered by the real submit path
and provenance recorded per attempt."""

from __future__ import annotations

from pathlib import Path

import pytest

import results_db
from contract.errors import SpecError
from orchestrator.cli.main import main
from orchestrator.run.driver.code_cache import code_rerun_plan, current_code, requeue_other_code
from orchestrator.run.driver.paths import checkpoint_dir
from orchestrator.run.driver.submit import register
from orchestrator.sweep.plan import make_plan
from orchestrator.sweep.spec import loads_spec
from tests.support.report_db import OTHER_COMMIT, provenance
from tests.support.synthdb import play, sweep_yaml

SPEC = {"name": "cc", "base": {"model": {"preset": "tiny"}},
        "variants": {"baseline": {}, "g1": {"gate.position": "G1"}}, "seeds": [0, 1]}


def _plan(tmp_path: Path, cached_by: str | None):
    text = sweep_yaml({**SPEC, **({"cached_by": cached_by} if cached_by else {})})
    path = tmp_path / f"cc-{cached_by}.yaml"
    path.write_text(text)
    return make_plan(path)


@pytest.fixture
def trained(tmp_path: Path):
    """The sweep trained once: baseline runs by the current code, g1 runs by another commit
    (a trainer fix landed since), one g1 run failed; each run left a checkpoint folder."""
    db = results_db.open(f"sqlite:///{tmp_path / 'r.db'}")
    plan = _plan(tmp_path, None)
    res = register(db, plan, force=False)
    storage = tmp_path / "runs"
    for row in res.to_run:
        other = row.variant == "g1"
        end = "failed" if row.name == "g1-s1" else "succeeded"
        play(db, row.id, end, provenance=provenance(OTHER_COMMIT) if other else provenance())
        ckpt = checkpoint_dir(storage.resolve(), "cc", row.name) / "step_00000010"
        ckpt.mkdir(parents=True)
    return db, storage


def test_cached_by_is_validated_with_its_line_and_does_not_change_fingerprints(
        tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"s.yaml:2: cached_by: Input should be 'config' or "
                                        r"'config_and_code' \(got 'code'\)"):
        loads_spec("name: a\ncached_by: code\n", "s.yaml")
    plain, both = _plan(tmp_path, None), _plan(tmp_path, "config_and_code")
    assert plain.spec.cached_by == "config" and both.spec.cached_by == "config_and_code"
    assert [r.fingerprint for r in plain.runs] == [r.fingerprint for r in both.runs]


def test_by_config_a_result_of_other_code_stays_cached(trained, tmp_path: Path) -> None:
    db, storage = trained
    res = register(db, _plan(tmp_path, "config"), force=False)
    said: list[str] = []
    again = requeue_other_code(db, _plan(tmp_path, "config"), res, storage, said.append)
    assert again is res and not said
    assert sorted(r.name for r in again.cached) == ["baseline-s0", "baseline-s1", "g1-s0"]


def test_by_config_and_code_other_codes_results_train_again_from_step_0(
        trained, tmp_path: Path) -> None:
    db, storage = trained
    plan = _plan(tmp_path, "config_and_code")
    res = register(db, plan, force=False)
    assert [r.name for r in res.to_run] == ["g1-s1"]  # the failed one, as ever
    said: list[str] = []
    again = requeue_other_code(db, plan, res, storage, said.append)
    assert sorted(r.name for r in again.cached) == ["baseline-s0", "baseline-s1"]
    assert sorted(r.name for r in again.to_run) == ["g1-s0", "g1-s1"]
    g1 = db.run("g1-s0")
    assert g1 is not None and g1.status == "pending"
    assert not checkpoint_dir(storage.resolve(), "cc", "g1-s0").exists()
    assert checkpoint_dir(storage.resolve(), "cc", "baseline-s0").exists()
    assert said[0].startswith("1 cached run(s) were trained by other code than ")


def test_rerun_plan_takes_the_results_of_other_code(trained) -> None:
    db, _ = trained
    plan = code_rerun_plan(db, "cc")
    ids = {r: db.run(r).id for r in ("baseline-s0", "baseline-s1", "g1-s0", "g1-s1")}
    assert plan.take == [ids["g1-s0"]]
    left = dict(plan.left)
    assert left[ids["baseline-s0"]].startswith("succeeded: trained by the current code (")
    assert left[ids["g1-s1"]] == "failed: not in --status diverged,succeeded"
    assert code_rerun_plan(db, "cc", ["failed"]).take == [ids["g1-s1"]]
    assert current_code() in db.provenance(run_ids=[ids["baseline-s0"]])["code_version"]


def test_rerun_code_other_than_current_needs_a_sweep(capsys: pytest.CaptureFixture[str],
                                                     trained) -> None:
    db, _ = trained
    url = db.url.render_as_string(hide_password=False)
    assert main(["rerun", "1", "--code-other-than-current", "--db", url]) == 2
    assert "give --sweep S and no run ids" in capsys.readouterr().err


def test_dry_run_counts_the_results_of_other_code(capsys: pytest.CaptureFixture[str], trained,
                                                  tmp_path: Path) -> None:
    db, _ = trained
    url = db.url.render_as_string(hide_password=False)
    for cached_by, want in ((None, "dry run: 4 runs, 3 cached, 1 to run; nothing"),
                            ("config_and_code", "dry run: 4 runs, 2 cached, 2 to run (1 "
                                                "result(s) of other code: cached_by "
                                                "config_and_code); nothing")):
        path = _plan(tmp_path, cached_by).path
        assert main(["submit", str(path), "--dry-run", "--no-params", "--db", url]) == 0
        assert want in " ".join(capsys.readouterr().out.split())
