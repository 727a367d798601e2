"""Cluster sizing (orchestrator/run/cluster.py) and, with real processes, a 2-node Ray cluster
started with ``ray start``: trials land on both nodes. The fault-injection matrix on the same
cluster (killed worker / driver / node, SIGTERM, concurrent submits) is
tests/e2e/test_cluster_faults.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import results_db
from contract.config import Resources, RunSpec
from contract.errors import UserError
from orchestrator.run.cluster import (
    NodeResources,
    check_fits,
    check_parallelism,
    filesystem_type,
    max_concurrent_trials,
    scaling_kwargs,
    storage_warning,
    trial_bundles,
    validate_storage,
)
from tests.cluster_fixtures import CLUSTER_SWEEP

if TYPE_CHECKING:
    from tests.cluster_fixtures import TwoNodes

# The Ray fixtures (tests/cluster_fixtures.py), until tests/conftest.py registers the plugin.

NODES = [NodeResources("a", "10.0.0.1", 8, 2), NodeResources("b", "10.0.0.2", 8, 2)]


def test_trial_bundles() -> None:
    assert trial_bundles(Resources(cpus=2, gpus=1)) == [{"CPU": 2, "GPU": 1}]
    assert trial_bundles(Resources(cpus=2, gpus=1, workers=4)) == [{"CPU": 0.01}]


def test_concurrency_counts_worker_slots_per_node() -> None:
    one = Resources(cpus=1, gpus=1)
    assert max_concurrent_trials([one] * 10, NODES) == 4  # 2 GPUs x 2 nodes
    assert max_concurrent_trials([one] * 3, NODES) == 3  # never more than the trials
    two = Resources(cpus=3, gpus=1, workers=2)
    assert max_concurrent_trials([two] * 5, NODES) == 2  # 4 GPU slots / 2 workers
    cpu = Resources(cpus=3)
    assert max_concurrent_trials([cpu] * 9, NODES) == 4  # 2 per 8-CPU node, not 16 // 3 = 5
    assert max_concurrent_trials([cpu] * 9, NODES, requested=7) == 7
    # a multi-worker trial's coordinator (0.01 CPU) must fit beside its workers
    laptop = [NodeResources("l", "127.0.0.1", 2, 0)]
    assert max_concurrent_trials([Resources(cpus=0.5, workers=2)] * 3, laptop) == 1
    with pytest.raises(UserError, match="resources.workers=2 needs 2 worker slots"):
        max_concurrent_trials([Resources(cpus=1, workers=2)], laptop)


def test_fit_errors_name_the_field() -> None:
    with pytest.raises(UserError, match=r"resources.cpus=16.*does not fit on any node"):
        check_fits(Resources(cpus=16), NODES)
    with pytest.raises(UserError, match=r"resources.workers=5 needs 5 worker slots"):
        check_fits(Resources(cpus=1, gpus=1, workers=5), NODES, run="big")
    with pytest.raises(UserError, match="cluster has no GPUs"):
        scaling_kwargs(Resources(gpus=1, workers=2), gpus_in_cluster=0)
    kw = scaling_kwargs(Resources(cpus=2, gpus=1, workers=2), gpus_in_cluster=4)
    assert kw == {"num_workers": 2, "use_gpu": True,
                  "resources_per_worker": {"CPU": 2, "GPU": 1}}


def test_expert_parallel_size() -> None:
    spec = RunSpec(name="m", model={"preset": "tiny-moe", "moe": {"n_experts": 4, "d_expert": 8,
                                                                  "ep_size": 4}},
                   resources={"workers": 2})
    with pytest.raises(UserError, match="model.moe.ep_size=4 must divide resources.workers=2"):
        check_parallelism(spec)
    check_parallelism(spec.model_copy(update={"resources": Resources(workers=4)}))


def test_validate_storage(tmp_path: Path) -> None:
    assert validate_storage(tmp_path / "new" / "dir") == str(tmp_path / "new" / "dir")
    assert validate_storage(f"file://{tmp_path}") == str(tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="--storage .*not a writable directory"):
        validate_storage(blocker / "sub")
    with pytest.raises(UserError, match="cannot open the nosuchfs:// file system"):
        validate_storage("nosuchfs://bucket/path")


def test_shared_storage_warning(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("rootfs / ext4 rw 0 0\nserver:/export /shared nfs4 rw 0 0\n")
    assert filesystem_type("/shared/runs/x", str(mounts)) == "nfs4"
    assert filesystem_type("/home/me", str(mounts)) == "ext4"
    one_machine = [NodeResources("a", "10.0.0.1", 1, 0), NodeResources("b", "10.0.0.1", 1, 0)]
    assert storage_warning(str(tmp_path), one_machine) is None
    assert storage_warning("s3://bucket/runs", NODES) is None
    warning = storage_warning(str(tmp_path), NODES)
    if filesystem_type(tmp_path) not in ("nfs", "nfs4"):
        assert warning is not None and "spans 2 machines" in warning


# ---- real 2-node cluster ---------------------------------------------------------------------


def _env(address: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GATESWEEP_HEARTBEAT_S="1", GATESWEEP_FLUSH_S="1", PYTHONUNBUFFERED="1",
               RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    return env


def _cli(cluster: TwoNodes, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orchestrator", *map(str, args)],
                          env=_env(cluster.address), capture_output=True, text=True,
                          timeout=timeout)


def _nodes_of_pids(address: str, pids: set[int]) -> dict[int, str]:
    """pid -> Ray node id, from the GCS actor table (dead trial actors included)."""
    import ray
    from ray._private.state import state

    ray.init(address=address, log_to_driver=False, configure_logging=False)
    try:
        table = state.actor_table(None)
        return {int(a["Pid"]): a["Address"]["NodeID"] for a in table.values()
                if int(a.get("Pid") or 0) in pids}
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_two_node_cluster(ray_two_nodes: TwoNodes, tmp_path: Path) -> None:
    """A sweep's two trials run one per node."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = tmp_path / "two.yaml"
    spec.write_text(CLUSTER_SWEEP.format(name="two-nodes", preset="tiny", steps=20, seq=32,
                                         variants="  baseline: {}\n  sdpa: {gate.position: G1}",
                                         retries=0))
    res = _cli(ray_two_nodes, "submit", spec, "--db", url, "--storage", tmp_path / "runs",
               "--address", ray_two_nodes.address)
    assert res.returncode == 0, res.stdout + res.stderr
    db = results_db.open(url)
    attempts = [a for rid in db.runs()["id"].to_list() for a in db.attempts(int(rid))]
    assert len(attempts) == 2 and {a.status for a in attempts} == {"succeeded"}
    hosts = {a.host for a in attempts}  # hostname/node-id prefix (cluster.host_label)
    assert len(hosts) == 2 and all("/" in h for h in hosts), hosts
    # cross-check with Ray's own record of where the trial processes ran
    nodes = _nodes_of_pids(ray_two_nodes.address, {a.pid for a in attempts})
    assert len(set(nodes.values())) == 2, nodes
    assert {h.split("/")[1] for h in hosts} == {n[:12] for n in nodes.values()}
    # the claims: each attempt names the driver that claimed it
    assert len({a.owner for a in attempts}) == 1 and attempts[0].owner.startswith("submit ")


# ---- submit --detach (orchestrator/cli/jobs.py) --------------------------------------------------
class _FakeClient:
    """Records submit_job's arguments (the real Jobs API is exercised by the slow test)."""

    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}

    def submit_job(self, **kwargs: Any) -> str:
        self.kwargs = kwargs
        assert Path(kwargs["runtime_env"]["working_dir"], "two.yaml").exists()  # uploaded copy
        assert kwargs["runtime_env"]["env_vars"]["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"
        return str(kwargs["submission_id"])


def test_detach_builds_the_cluster_command(tmp_path: Path) -> None:
    from orchestrator.cli.detach import submit_detached

    spec = tmp_path / "two.yaml"
    spec.write_text(CLUSTER_SWEEP.format(name="two", preset="tiny", steps=5, seq=16,
                                         variants="  baseline: {}", retries=0))
    fake = _FakeClient()
    job = submit_detached(spec, "sqlite:///rel.db", "127.0.0.1:1", tmp_path / "runs",
                          max_concurrent=3, client=fake)
    assert job.job_id.startswith("gatesweep-two-")
    cmd = fake.kwargs["entrypoint"]
    assert " -m orchestrator.cli.jobs two.yaml --db sqlite:////" in cmd  # made absolute
    assert f"--storage {tmp_path / 'runs'}" in cmd and "--max-concurrent 3" in cmd
    with pytest.raises(UserError, match="--db sqlite://: a detached sweep needs"):
        submit_detached(spec, "sqlite://", "127.0.0.1:1", tmp_path, client=fake)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nbase: {model: {preset: nope}}\n")
    with pytest.raises(UserError):
        submit_detached(bad, "sqlite:///x.db", "127.0.0.1:1", tmp_path, client=fake)
    assert not (tmp_path / "x.db").exists()


def _wait_for_job(client: Any, job_id: str, timeout_s: float = 600) -> str:
    """Poll until the job ends; returns its final status name (SUCCEEDED, FAILED, STOPPED)."""
    from ray.job_submission import JobStatus

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = client.get_job_status(job_id)
        if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
            return str(status.value)
        time.sleep(1)
    raise TimeoutError(f"Ray job {job_id} still running after {timeout_s:g} s")


@pytest.mark.slow
def test_detached_submit_runs_as_a_ray_job(ray_two_nodes_jobs: TwoNodes, tmp_path: Path
                                           ) -> None:
    """The submitting process exits at once; the cluster finishes the sweep on its own."""
    from ray.job_submission import JobSubmissionClient

    cluster = ray_two_nodes_jobs
    url = f"sqlite:///{tmp_path / 'd.db'}"
    spec = tmp_path / "det.yaml"
    spec.write_text(CLUSTER_SWEEP.format(name="detached", preset="tiny", steps=10, seq=32,
                                         variants="  baseline: {}", retries=0))
    env = {**_env(cluster.address), "GATESWEEP_JOB_PYTHON": sys.executable}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "orchestrator", "submit", str(spec), "--detach",
                          "--db", url, "--storage", str(tmp_path / "runs"), "--address",
                          cluster.address], env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert time.monotonic() - t0 < 60  # returned without waiting for the sweep
    match = re.search(r"submitted Ray job (\S+);", res.stdout)
    assert match, res.stdout
    job_id = match.group(1)
    assert cluster.dashboard is not None
    client = JobSubmissionClient(cluster.dashboard)
    status = _wait_for_job(client, job_id, timeout_s=300)
    assert status == "SUCCEEDED", client.get_job_logs(job_id)[-3000:]
    db = results_db.open(url)
    assert db.runs()["status"].to_list() == ["succeeded"]
