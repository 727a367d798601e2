"""An adaptive (``decide:``) sweep end to end: `orchestrator submit` subprocesses, a real local
Ray, DeepSpeed training, a real SQLite file. The driver is killed with SIGKILL mid-sweep and a
second `submit` continues the same allocation: every (row, seed) is trained at most once, a row
got a seed beyond the first ones only when its reading was undecided without it, a decided row
got no more, and the run budget holds. Slow: marked ``slow``.

Both submits join the module's local cluster (``--address``; Ray ends a dead driver's trials):
the subject is the allocation, and a submit that starts its own Ray (CPU-seconds of daemons
and workers) is tests/e2e/test_orchestrator_e2e.py's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import results_db
from contract.metrics import VAL_PPL
from results_db.analysis import confseq
from results_db.analysis.decide_rule import DecideRule
from tests.e2e.test_orchestrator_e2e import _kill_group

pytestmark = pytest.mark.slow

# `short` trains 2 steps: an untrained model's PPL, far above the baseline's in every seed (a
# row that decides "worse" at its first seeds); `gated` is the paper's G1 gate, whose few-%
# effect on a 20-step toy may or may not decide by seed 6.
SWEEP = """\
name: adapt-e2e
base:
  model: {preset: tiny}
  train: {steps: 20, batch_size: 4, seq_len: 32, warmup: 1, eval_every: 0, eval_batches: 1,
          log_every: 5, checkpoint_every: 10}
  eval: {probes: []}
variants:
  baseline: {}
  gated: {gate.position: G1}
  short: {train.steps: 2}
decide: {margin: 0.002, error_rate: 0.2, first_seeds: 5, max_seeds: 6, budget: {runs: 17}}
resources: {cpus: 1}
"""
RULE = DecideRule(metric=VAL_PPL, margin=0.002, relative=True, error_rate=0.2, max_seeds=6,
                  higher_is_better=False)


def _env() -> dict[str, str]:
    e = dict(os.environ, GATESWEEP_HEARTBEAT_S="1", GATESWEEP_FLUSH_S="1", PYTHONUNBUFFERED="1")
    e.pop("RAY_ADDRESS", None)
    return e


def _submit(spec: Path, url: str, storage: Path, address: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "submit", str(spec), "--db",
                             url, "--storage", str(storage), "--address", address], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _succeeded(url: str) -> int:
    if not Path(url.removeprefix("sqlite:///")).exists():
        return 0
    runs = results_db.open(url).runs(with_config=False, columns=["status"])
    return int((runs["status"] == "succeeded").sum()) if runs.height else 0


def test_killed_adaptive_driver_resumes_the_same_allocation(ray_local: str, tmp_path: Path
                                                            ) -> None:
    spec = tmp_path / "adapt.yaml"
    spec.write_text(SWEEP)
    url, storage = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "runs"
    first = _submit(spec, url, storage, ray_local)
    try:
        deadline = time.monotonic() + 400
        while _succeeded(url) < 4:
            assert first.poll() is None, first.stdout.read().decode() if first.stdout else ""
            assert time.monotonic() < deadline, "no 4 runs succeeded in time"
            time.sleep(1)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        _kill_group(first)
    second = _submit(spec, url, storage, ray_local)
    try:
        out, _ = second.communicate(timeout=600)
    finally:
        _kill_group(second)
    text = " ".join(out.decode().split())  # rich wraps long lines
    assert second.returncode == 0, text
    assert "Bonferroni over 2 rows, family-wise error <= 20 %" in text, text  # METHOD

    db = results_db.open(url)
    runs = db.runs(with_config=False, columns=["id", "variant", "seed", "group_key", "status"])
    keys = list(zip(runs["group_key"].to_list(), runs["seed"].to_list(), strict=True))
    assert len(keys) == len(set(keys))  # no seed registered twice
    assert set(runs["status"].to_list()) == {"succeeded"}, runs
    assert runs.height <= 17  # the run budget
    assert all(len(db.attempts(int(i))) <= 2 for i in runs["id"])  # killed ones ran once more
    per = {v: sorted(runs.filter(runs["variant"] == v)["seed"].to_list())
           for v in ("baseline", "gated", "short")}
    assert per["short"] == list(range(5))  # decided worse at its first seeds: nothing more
    rows = {r["variant"]: r for r in db.decide_rows("adapt-e2e", RULE).to_dicts()}
    assert rows["short"]["verdict"] == "worse"
    # the gate row got seed 5 exactly when its 5 first seeds left it undecided
    values = db.runs(sweep="adapt-e2e")
    wide = {(v, s): x for v, s, x in zip(values["variant"], values["seed"],
                                         _ppl(db, values["id"].to_list()), strict=True)}
    d5 = np.array([(wide[("gated", s)] - wide[("baseline", s)]) / wide[("baseline", s)]
                   for s in range(5)])
    at5 = confseq.read(d5, RULE.error_rate / 2)
    open_at5 = confseq.verdicts(np.array([at5.low]), np.array([at5.high]), RULE.margin, False,
                                False)[0] == confseq.UNDECIDED
    assert (per["gated"] == list(range(6))) == open_at5


def _ppl(db: results_db.ResultsDB, ids: list[int]) -> list[float]:
    summ = db.summaries([int(i) for i in ids], names=[VAL_PPL])
    got = {int(r): float(v) for r, v in summ.select("run_id", "value").iter_rows()}
    return [got[int(i)] for i in ids]
