"""Evaluation end to end: `orchestrator submit sweeps/eval.yaml` through the real CLI
(local Ray, DeepSpeed, lm-eval on the shipped offline tiny tasks, SQLite), then the numbers in
SQL, in the dashboard's ablation tables (AppTest) and `orchestrator evaluate` on a finished run.
The end-to-end tests are ``slow`` (~1 min submit on 2 idle cores); the CLI's input errors are
checked fast on a hand-built DB. `evaluate` runs in this process (``main``, the CLI's entry
point): it starts no Ray, and a process of its own would re-import torch and lm-eval (~5
CPU-seconds) for each of the three calls.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import results_db
from contract.config import BenchmarkSpec, RunSpec
from contract.errors import UserError
from dashboard.ablation import SCALE_CAVEAT
from dashboard.tables import fmt_lr, fmt_num
from orchestrator.cli.evaluate import build_benchmarks
from orchestrator.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SWEEP = ROOT / "sweeps" / "eval.yaml"
APP = str(ROOT / "dashboard" / "app.py")
LADDER = (1e-3, 1e-2, 1e-1)  # sweeps/eval.yaml lr_ladder {min 1e-3, max 1e-1, steps 3}
METHODS, FACTORS = ("none", "linear", "yarn"), (1, 2, 4)


def cli(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GATESWEEP_HEARTBEAT_S": "1", "GATESWEEP_FLUSH_S": "1"}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "orchestrator", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------- fast: inputs
def test_tasks_option_builds_benchmarks_with_shots_and_limit(tmp_path: Path) -> None:
    got = build_benchmarks("a, b", 5, 2, tmp_path, ())
    assert got == (BenchmarkSpec(task="a", num_fewshot=2, limit=5, include_path=str(tmp_path)),
                   BenchmarkSpec(task="b", num_fewshot=2, limit=5, include_path=str(tmp_path)))
    spec_b = (BenchmarkSpec(task="x", num_fewshot=1),)
    assert build_benchmarks(None, None, None, None, spec_b) is None  # the spec's own, as is
    assert build_benchmarks(None, 3, None, None, spec_b) == (
        BenchmarkSpec(task="x", num_fewshot=1, limit=3),)
    with pytest.raises(UserError, match="--tasks"):
        build_benchmarks(" , ", None, None, None, ())


def _finished_run(url: str, name: str, seed: int, status: str = "succeeded") -> int:
    db = results_db.open(url)
    spec = RunSpec(name=name, sweep="s", seed=seed, model={"preset": "tiny"})
    sid = db.ensure_sweep("s", "name: s")
    (row,) = db.register_runs(sid, [results_db.NewRun(
        name, spec.fingerprint(), "baseline", seed, spec.model_dump(mode="json"))]).to_run
    if status != "pending":
        db.finish_attempt(db.start_attempt(row.id, "test").id, status)
    return row.id


def test_evaluate_errors_name_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    run_id = _finished_run(url, "done-s0", 0)
    _finished_run(url, "queued-s1", 1, status="pending")
    args = ["--tasks", "gatesweep_tiny_mc", "--db", url]
    assert main(["evaluate", "nope", *args]) == 2
    assert "no run with id or name 'nope'" in capsys.readouterr().err
    assert main(["evaluate", "queued-s1", *args]) == 2
    assert "run queued-s1 is pending" in capsys.readouterr().err
    assert main(["evaluate", "done-s0", *args]) == 2
    assert "run done-s0 (id 1, succeeded) has no checkpoint" in capsys.readouterr().err
    empty = tmp_path / "ckpt"
    empty.mkdir()
    results_db.open(url).add_artifact(run_id, None, "checkpoint_dir", path=str(empty))
    assert main(["evaluate", str(run_id), *args]) == 2
    # a recorded checkpoint dir outside <storage>/<sweep>/<name>/checkpoints is refused
    err = capsys.readouterr().err
    assert f"its recorded checkpoint dir '{empty}'" in err and "refusing to use it" in err, err
    if not torch.cuda.is_available():
        assert main(["evaluate", "done-s0", *args, "--device", "cuda"]) == 2
        assert "--device cuda: CUDA is not available" in capsys.readouterr().err
    assert results_db.open(url).run(run_id).status == "succeeded"


# ---------------------------------------------------------------------- slow: end to end
@pytest.fixture(scope="module")
def submitted(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("eval_e2e")
    url = f"sqlite:///{tmp / 'r.db'}"
    res = cli("submit", SWEEP, "--db", url, "--storage", tmp / "runs")
    assert res.returncode == 0, res.stdout + res.stderr
    return url


def _values(db: results_db.ResultsDB, name: str) -> dict[str, float | None]:
    s = db.summaries(sweep="eval-toy", names=[name])
    return dict(zip(s["run"].to_list(), s["value"].to_list(), strict=True))


@pytest.mark.slow
def test_submit_writes_bench_longctx_and_max_stable_lr(submitted: str) -> None:
    db = results_db.open(submitted)
    runs = db.runs(sweep="eval-toy")
    assert runs.height == 6 and set(runs["status"]) == {"succeeded"}
    names = set(runs["name"])
    for task in ("gatesweep_tiny_mc", "gatesweep_tiny_gen"):
        got = _values(db, f"bench/{task}")
        assert set(got) == names and all(0.0 <= v <= 1.0 for v in got.values()), (task, got)
    for m in METHODS:
        for f in FACTORS:
            got = _values(db, f"longctx/{m}/{f}x/ppl")
            assert set(got) == names and all(v is not None and math.isfinite(v) and v > 1
                                             for v in got.values()), (m, f, got)
    # at 1x every method is plain RoPE: the same number
    assert _values(db, "longctx/yarn/1x/ppl") == _values(db, "longctx/none/1x/ppl")
    msl = db.max_stable_lr("eval-toy")
    assert sorted(msl["variant"]) == ["baseline", "sdpa_elementwise"]
    assert all(any(math.isclose(lr, x) for x in LADDER) for lr in msl["max_stable_lr"])


def _goto_ablation(url: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> object:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("GATESWEEP_DB", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.sidebar.radio(key="page").set_value("Ablation tables").run()
    at.radio(key="ab_kind").set_value(kind).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.slow
def test_dashboard_shows_the_db_numbers(submitted: str, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    db = results_db.open(submitted)
    quality = _goto_ablation(submitted, "quality", monkeypatch).dataframe[0].value
    assert len(quality) == 6  # one row per (variant, LR); one seed: the value itself
    for task in ("gatesweep_tiny_mc", "gatesweep_tiny_gen"):
        assert sorted(quality[task]) == sorted(fmt_num(v) for v in _values(db, f"bench/{task}")
                                               .values())
    at = _goto_ablation(submitted, "stability", monkeypatch)
    assert [w.value for w in at.warning] == [f"**Different scale.** {SCALE_CAVEAT}"]
    (table,) = [d.value for d in at.dataframe if "Max stable LR" in d.value.columns]
    shown = table.set_index("Variant")["Max stable LR"].to_dict()
    msl = db.max_stable_lr("eval-toy")
    assert shown == {v: fmt_lr(lr) for v, lr in zip(msl["variant"], msl["max_stable_lr"],
                                                    strict=True)}
    table = _goto_ablation(submitted, "longctx", monkeypatch).dataframe[0].value
    for m in METHODS:
        for f in FACTORS:
            want = sorted(fmt_num(v) for v in _values(db, f"longctx/{m}/{f}x/ppl").values())
            assert sorted(table[f"{m} {f}x PPL"]) == want, (m, f)


def _evaluate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`orchestrator evaluate ARGS` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = main(["evaluate", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_evaluate_adds_a_benchmark_to_the_latest_attempt(submitted: str,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    db = results_db.open(submitted)
    row = db.run("sdpa_elementwise-lr1e-2-s0")
    before = _values(db, "bench/gatesweep_tiny_mc")
    code, out, err = _evaluate(capsys, row.name, "--tasks", "gatesweep_tiny_ppl", "--limit", "4",
                               "--db", submitted)
    assert code == 0, out + err
    assert "bench/gatesweep_tiny_ppl" in out
    (att,) = db.attempts(row.id)  # no new attempt, status unchanged
    assert db.run(row.id).status == "succeeded" and att.status == "succeeded"
    s = db.summaries(run_ids=[row.id], names=["bench/gatesweep_tiny_ppl"])
    assert s.height == 1 and math.isfinite(s["value"][0]) and s["value"][0] > 1
    attributed = db.query("SELECT attempt_id FROM summaries WHERE run_id = "
                          f"{row.id} AND name = 'bench/gatesweep_tiny_ppl'")
    assert attributed["attempt_id"].to_list() == [att.id]
    arts = db.artifacts(row.id)
    (ev,) = map(json.loads, arts.filter(arts["kind"] == "evaluation")["data"].to_list())
    assert ev["tasks"][0]["task"] == "gatesweep_tiny_ppl" and ev["tasks"][0]["limit"] == 4
    assert _values(db, "bench/gatesweep_tiny_mc") == before  # other numbers untouched
    other = _values(db, "bench/gatesweep_tiny_ppl")
    assert list(other) == [row.name]  # only the evaluated run got the new task

    # without --tasks: the spec's own benchmarks and long-context evals again (--limit applied)
    again = db.run("baseline-lr1e-3-s0")
    code, out, err = _evaluate(capsys, again.name, "--limit", "4", "--db", submitted)
    assert code == 0, out + err
    arts = db.artifacts(again.id)
    (ev,) = map(json.loads, arts.filter(arts["kind"] == "evaluation")["data"].to_list())
    assert ev["longctx"] is True and [(b["task"], b["limit"]) for b in ev["tasks"]] == [
        ("gatesweep_tiny_mc", 4), ("gatesweep_tiny_gen", 4)]
    assert {"bench/gatesweep_tiny_mc", "longctx/yarn/4x/ppl"} <= set(ev["summaries"])
    assert len(db.attempts(again.id)) == 1 and db.run(again.id).status == "succeeded"

    code, out, err = _evaluate(capsys, row.name, "--tasks", "no_such_task", "--db", submitted)
    assert code == 2 and "unknown lm-eval task(s) no_such_task" in err, out + err
