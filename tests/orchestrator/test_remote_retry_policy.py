"""GATESWEEP_RETRY_CODE_ERRORS is the driver's setting, and reaches trials on other nodes.

The trial decides whether its failure is worth another attempt. It used to read the variable
from its own process environment, which on another node is that node's, not the driver's: a
sweep submitted with GATESWEEP_RETRY_CODE_ERRORS=1 to a cluster did not retry its code errors.
The driver now reads it once and it travels with each trial's job (``TrialJob.policy``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import results_db
from contract.config import RunSpec
from orchestrator.run.trial.trial_job import TrialJob

CLI = Path(sys.executable).parent / "orchestrator"
# a code error in every attempt: the text file is not there
SWEEP = """\
name: codeerr
base:
  model: {{preset: tiny}}
  data: {{source: text, path: {missing}}}
  train: {{steps: 4, batch_size: 2, seq_len: 16, warmup: 1, eval_every: 0, eval_batches: 1,
          log_every: 2, checkpoint_every: 0}}
variants:
  baseline: {{}}
seeds: [0]
resources: {{cpus: 1}}
retries: 1
"""


def test_the_policy_is_the_jobs_not_the_trials_environment(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    spec = RunSpec(name="r", sweep="s", model={"preset": "tiny"})
    job = TrialJob.of(1, "r", spec, tmp_path, "sqlite://", retries=1, retry_code_errors=True)
    monkeypatch.setenv("GATESWEEP_RETRY_CODE_ERRORS", "0")  # the trial's node says otherwise
    assert job.policy.retry_code_errors and job.policy.retries == 1
    assert not TrialJob.of(1, "r", spec, tmp_path, "sqlite://").policy.retry_code_errors


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["1", "0"])
def test_a_driver_setting_reaches_trials_on_a_cluster(
        flag: str, ray_local: str, tmp_path: Path) -> None:
    """The cluster (ray_local) was started without the variable, as another node would be;
    only the driver that joins it by address has it."""
    assert "GATESWEEP_RETRY_CODE_ERRORS" not in os.environ
    sweep = tmp_path / "codeerr.yaml"
    sweep.write_text(SWEEP.format(missing=tmp_path / "missing.txt"))
    url = f"sqlite:///{tmp_path / 'results.db'}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["GATESWEEP_RETRY_CODE_ERRORS"] = flag
    proc = subprocess.run([str(CLI), "submit", str(sweep), "--db", url, "--storage",
                           str(tmp_path / "runs"), "--address", ray_local, "--no-data"], env=env,
                          capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log
    db = results_db.open(url)
    [run] = db.runs().iter_rows(named=True)
    attempts = db.attempts(int(run["id"]))
    assert [a.fault for a in attempts] == ["code_error"] * (2 if flag == "1" else 1), log
    said = "retried" if flag == "1" else "not retried"
    assert attempts[0].error is not None and f"[code_error; {said}]" in attempts[0].error, log
