"""deploy/slurm/gatesweep.sbatch on a real Slurm: a 2-node cluster on this host
(tests/support/slurm.py: munged, slurmctld and two slurmd daemons, each its own Slurm node),
PostgreSQL as the results DB.

- The script's Ray cluster spans the allocation (head on n1, a worker through srun on n2), and it
  waits for them by asking Ray, not by sleeping: a node whose Ray never joins fails the job
  within GATESWEEP_RAY_WAIT_S with one line naming that node.
- The allocation's end: the signal that ``#SBATCH --signal=B:TERM@300`` sends before the time
  limit (SIGTERM to the batch shell, here through ``scancel --batch --signal=TERM``) stops the
  driver, which marks its unfinished runs cancelled; ``sbatch`` of the same file again resumes
  them from their checkpoints: every run succeeded, on both Ray nodes, every logged step
  present exactly once (no gap, no duplicate), as the fault matrix checks resumption
  (tests/e2e/test_cluster_faults.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import results_db
from orchestrator.run.cluster import parse_host_label
from tests.cluster_fixtures import CLUSTER_SWEEP, _kill_processes_naming, _node_ports
from tests.support.ports import free_port
from tests.support.slurm import SlurmCluster, missing_binaries, start_slurm, stop_slurm

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "deploy" / "slurm" / "gatesweep.sbatch"
# tiny preset: the stop is sent once a checkpoint (step 10) is in the DB, so 200 steps keep ~190
# in flight when it lands (as in the fault matrix); 400 only made the resuming job train longer
STEPS, LOG_EVERY = 200, 5
JOB_S = 300  # one sbatch from start to end, on the loaded 2-core machine


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    if missing := missing_binaries():
        pytest.skip(f"Slurm or munge is not installed (no {', '.join(missing)}); "
                    "`make system-deps` installs slurm-wlm and munge")
    if os.geteuid() != 0:
        pytest.skip("the throw-away Slurm runs its daemons as root (SlurmUser=root)")
    cluster = start_slurm(nodes=2, cpus=1)
    try:
        yield cluster
    finally:
        stop_slurm(cluster)


@contextlib.contextmanager
def _job_env(slurm: SlurmCluster, url: str, tmp: Path, **extra: str) -> Iterator[dict[str, str]]:
    """The environment one sbatch runs in: the DB, shared storage, and a Ray of its own (a
    fresh GCS port, temp dir and per-node ports: both Ray nodes share this host). Afterwards
    whatever Ray left under its temp dir is stopped, and the dir removed."""
    ray_tmp = tempfile.mkdtemp(prefix="gssr", dir="/tmp")  # short: Ray's socket paths
    ports = contextlib.ExitStack()
    try:
        head, worker = _node_ports(ports), _node_ports(ports)
        env = slurm.env()
        env.pop("RAY_ADDRESS", None)
        env.update(
            PATH=f"{Path(sys.executable).parent}:{env['PATH']}", GATESWEEP_PYTHON=sys.executable,
            GATESWEEP_DB=url, GATESWEEP_STORAGE=str(tmp / "runs"), RAY_PORT=str(free_port()),
            RAY_TMPDIR=ray_tmp, RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
            GATESWEEP_HEARTBEAT_S="1", GATESWEEP_FLUSH_S="1",
            GATESWEEP_RAY_HEAD_ARGS=" ".join(["--include-dashboard=false",
                                              "--include-log-monitor=false", *head]),
            GATESWEEP_RAY_WORKER_ARGS=" ".join(["--include-log-monitor=false", *worker,
                                                extra.pop("worker_args", "")]),
            **extra)
        yield env
    finally:
        _kill_processes_naming(ray_tmp)
        ports.close()
        shutil.rmtree(ray_tmp, ignore_errors=True)


def _sbatch(slurm: SlurmCluster, env: dict[str, str], tmp: Path, sweep: Path) -> int:
    out = slurm.run("sbatch", "--parsable", "--nodes=2", "--gpus-per-node=0",
                    "--cpus-per-task=1", "--time=15", f"--output={tmp}/job-%j.out",
                    f"--chdir={tmp}", str(SBATCH), str(sweep), env=env)
    return int(out.strip().split(";")[0])


def _output(tmp: Path, job: int) -> str:
    path = tmp / f"job-{job}.out"
    return path.read_text(errors="replace") if path.exists() else "(no output)"


def _sweep(tmp: Path, name: str, variants: int) -> Path:
    rows = "\n".join(f"  v{i}: {{train.lr: {round(1.1e-3 * (i + 1), 6)}}}"
                     for i in range(variants))
    path = tmp / f"{name}.yaml"
    path.write_text(CLUSTER_SWEEP.format(name=name, preset="tiny", steps=STEPS, seq=64,
                                         variants=rows, retries=0))
    return path


def _checkpointed(url: str) -> bool:
    """Some run is training and has written a checkpoint (so a stop now must resume it)."""
    db = results_db.open(url, migrate=False)
    try:
        for r in db.runs(with_config=False).iter_rows(named=True):
            atts = db.attempts(int(r["id"]))
            arts = db.artifacts(int(r["id"]))
            if atts and atts[-1].status == "running" and arts.height and \
                    "checkpoint" in arts["kind"].to_list():
                return True
        return False
    finally:
        db.close()


def _wait(what: str, pred: Any, slurm: SlurmCluster, job: int, tmp: Path,
          timeout: float = JOB_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = slurm.job(job).get("JobState")
        assert state in ("PENDING", "CONFIGURING", "RUNNING"), \
            f"job {job} is {state} before {what}:\n{_output(tmp, job)}"
        with contextlib.suppress(Exception):  # the schema may not exist yet
            if pred():
                return
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout:g} s:\n{_output(tmp, job)}")


def _assert_integrity(db: results_db.ResultsDB, run_id: int) -> None:
    """train/loss at every log_every step exactly once: no duplicates, no gaps."""
    counts = db.query(f"SELECT step, COUNT(*) AS n FROM metrics WHERE run_id = {run_id} "
                      "AND name = 'train/loss' GROUP BY step ORDER BY step")
    assert counts["step"].to_list() == list(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    assert set(counts["n"].to_list()) == {1}


def test_sbatch_spans_the_nodes_and_a_second_sbatch_resumes_after_the_end_signal(
        slurm: SlurmCluster, pg_url: str, tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, "slurm-smoke", variants=4)
    with _job_env(slurm, pg_url, tmp_path) as env:
        first = _sbatch(slurm, env, tmp_path, sweep)
        _wait("a checkpoint of a running run", lambda: _checkpointed(pg_url), slurm, first,
              tmp_path)
        # What --signal=B:TERM@300 delivers before the time limit: SIGTERM to the batch shell.
        slurm.run("scancel", "--batch", "--signal=TERM", str(first))
        ended = slurm.wait_job_end(first, timeout=120)
    out1 = _output(tmp_path, first)
    assert ended["JobState"] in ("COMPLETED", "FAILED"), (ended, out1)
    assert "Ray: n2 up after" in out1, out1  # the worker node joined, by Ray's word
    db = results_db.open(pg_url)
    states = db.runs(with_config=False)["status"].to_list()
    assert "running" not in states and "cancelled" in states, (states, out1)
    before = {a.id for i in db.runs(with_config=False)["id"].to_list()
              for a in db.attempts(int(i))}

    with _job_env(slurm, pg_url, tmp_path) as env:
        second = _sbatch(slurm, env, tmp_path, sweep)
        ended = slurm.wait_job_end(second, timeout=JOB_S)
    out2 = _output(tmp_path, second)
    assert (ended["JobState"], ended["ExitCode"]) == ("COMPLETED", "0:0"), (ended, out2)

    runs = db.runs(with_config=False)
    assert runs["status"].to_list() == ["succeeded"] * 4, out2
    resumed, nodes = [], set()  # nodes: the Ray nodes the second job's attempts ran on
    for rid in (int(i) for i in runs["id"].to_list()):
        atts = db.attempts(rid)
        assert atts[-1].status == "succeeded"
        nodes |= {parse_host_label(a.host)[1] for a in atts if a.id not in before}
        if len(atts) > 1:
            assert [a.status for a in atts[:-1]] == ["cancelled"] * (len(atts) - 1), atts
            resumed.append(rid)
        _assert_integrity(db, rid)
    assert resumed, "no run was in flight when the allocation ended"
    # The interrupted runs went on from their last checkpoints (0: stopped before its first),
    # the one in flight when the signal came from step 10 (its first checkpoint) or later.
    starts = db.summaries(run_ids=resumed, names=["train/resumed_from_step"])["value"].to_list()
    assert len(starts) == len(resumed) and max(starts) >= 10, starts
    assert len(nodes - {""}) >= 2, nodes  # trained on both Slurm nodes' Ray nodes


def test_a_node_whose_ray_never_joins_fails_the_job_naming_it(
        slurm: SlurmCluster, pg_url: str, tmp_path: Path) -> None:
    """n2's Ray cannot reach the head (its `ray start` waits on a GCS nobody serves, as
    behind a firewall): the job fails once GATESWEEP_RAY_WAIT_S has passed, saying which node
    did not join and which did, and the driver never starts (the DB has no runs)."""
    sweep = _sweep(tmp_path, "slurm-nojoin", variants=1)
    wait_s = 30  # > the head's start-up (~12 s here), which the same bound covers
    with _job_env(slurm, pg_url, tmp_path, GATESWEEP_RAY_WAIT_S=str(wait_s),
                  worker_args=f"--address=127.0.0.1:{free_port()}") as env:
        job = _sbatch(slurm, env, tmp_path, sweep)
        ended = slurm.wait_job_end(job, timeout=wait_s + 120)
    out = _output(tmp_path, job)
    assert (ended["JobState"], ended["ExitCode"]) == ("FAILED", "1:0"), (ended, out)
    assert "Ray: n1 up after" in out, out
    assert f"error: Ray node(s) on n2 not up after {wait_s} s (GATESWEEP_RAY_WAIT_S); " \
        "up: n1;" in out, out
    assert "runs, 0 cached" not in out, out  # orchestrator submit never ran
    assert results_db.open(pg_url).runs(with_config=False).height == 0
