"""No Ray worker imports from the directory ``orchestrator submit`` was typed in.

Ray puts a driver's working directory on every worker's ``sys.path`` of its job (its
``py_driver_sys_path``), first: a ``polars.py`` or a ``trainer/`` package there would be imported
inside every trial. Each planted module here writes a marker file (at an absolute path: a
trial's working directory is not the driver's) when imported; a real submit from that directory,
on a local Ray it starts and on a cluster it joins by address, trains its run and leaves none.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import results_db

CLI = Path(sys.executable).parent / "orchestrator"  # the console script a user types
PLANTED = ("polars.py", "trainer/__init__.py", "results_db/__init__.py",
           "orchestrator/__init__.py", "contract/__init__.py", "deepspeed/__init__.py")
SWEEP = """\
name: planted
base:
  model: {preset: tiny}
  train: {steps: 4, batch_size: 2, seq_len: 16, warmup: 1, eval_every: 0, eval_batches: 1,
          log_every: 2, checkpoint_every: 0}
variants:
  baseline: {}
seeds: [0]
resources: {cpus: 1}
"""


@pytest.fixture()
def planted(tmp_path: Path) -> Path:
    """A working directory holding the sweep file and modules that leave PWNED-<name> in
    ``tmp_path/markers`` when imported."""
    here, marks = tmp_path / "cwd", tmp_path / "markers"
    marks.mkdir()
    for rel in PLANTED:
        f = here / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        mark = marks / ("PWNED-" + rel.replace("/", "_"))
        f.write_text(f"open({str(mark)!r}, 'w').close()\n")
    (here / "sweep.yaml").write_text(SWEEP)
    return here


def _markers(planted: Path) -> list[str]:
    return sorted(p.name for p in (planted.parent / "markers").iterdir())


def _submit(planted: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], str]:
    url = f"sqlite:///{planted.parent / 'results.db'}"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run([str(CLI), "submit", "sweep.yaml", "--db", url, "--storage",
                           str(planted.parent / "runs"), *extra], cwd=planted, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc, url


def _succeeded(url: str) -> list[str]:
    return [str(r["status"]) for r in results_db.open(url).runs().iter_rows(named=True)]


@pytest.mark.slow
def test_a_local_submit_from_a_planted_directory_runs_none_of_it(planted: Path) -> None:
    proc, url = _submit(planted)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _succeeded(url) == ["succeeded"], proc.stdout + proc.stderr
    assert _markers(planted) == []


@pytest.mark.slow
def test_a_submit_to_a_cluster_from_a_planted_directory_runs_none_of_it(
        planted: Path, ray_local: str) -> None:
    """``--address HOST:PORT`` joins a running cluster as a plain driver (not Ray Client), which
    ships its working directory to the workers the same way."""
    proc, url = _submit(planted, "--address", ray_local)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _succeeded(url) == ["succeeded"], proc.stdout + proc.stderr
    assert _markers(planted) == []
