"""The cluster recipes in deploy/ (docs/cluster.md "Kubernetes" and "Slurm") stay runnable:
the KubeRay manifest parses into the objects KubeRay expects, its pieces agree with each other
(GPU limits = Ray's num-gpus, the DB URL from the Secret the docs create, the checkpoint path
on the shared RWX volume in every pod) and the sweep it submits validates; the sbatch script is
valid bash and follows Ray's documented pattern."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from orchestrator.sweep.plan import make_plan

ROOT = Path(__file__).resolve().parents[2]
RAYJOB = ROOT / "deploy" / "kuberay" / "rayjob.yaml"
SBATCH = ROOT / "deploy" / "slurm" / "gatesweep.sbatch"


def _docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(RAYJOB.read_text()) if d}


def _pods(job: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(rayStartParams, pod spec) of the head group and every worker group."""
    spec = job["spec"]["rayClusterSpec"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    return [(g["rayStartParams"], g["template"]["spec"]) for g in groups]


def test_rayjob_manifest_is_a_consistent_gpu_cluster() -> None:
    docs = _docs()
    assert set(docs) == {"PersistentVolumeClaim", "RayJob"}
    job, pvc = docs["RayJob"], docs["PersistentVolumeClaim"]
    assert job["apiVersion"] == "ray.io/v1" and job["spec"]["shutdownAfterJobFinishes"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]  # every node writes checkpoints
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:2] == ["orchestrator", "submit"]
    storage = argv[argv.index("--storage") + 1]
    assert "--db" not in argv  # the URL is a secret: GATESWEEP_DB, never the manifest
    workers = job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert workers and all(int(g["rayStartParams"]["num-gpus"]) > 0 for g in workers)
    for params, pod in _pods(job):
        (box,) = pod["containers"]
        env = {e["name"]: e for e in box["env"]}
        assert env["GATESWEEP_DB"]["valueFrom"]["secretKeyRef"] == {"name": "gatesweep-db",
                                                                    "key": "url"}
        gpus = int(box["resources"]["limits"].get("nvidia.com/gpu", 0))
        assert gpus == int(params.get("num-gpus", 0)), box["name"]  # Ray sees what k8s gives
        mounts = {m["name"]: m["mountPath"] for m in box["volumeMounts"]}
        claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]
                  if "persistentVolumeClaim" in v}
        shared = [n for n, c in claims.items() if c == pvc["metadata"]["name"]]
        assert shared and storage.startswith(mounts[shared[0]] + "/"), box["name"]
    assert "kubectl create secret generic gatesweep-db" in RAYJOB.read_text()  # the docs' step


def test_rayjob_sweep_validates_and_fits_the_worker_groups() -> None:
    job = _docs()["RayJob"]
    argv = shlex.split(job["spec"]["entrypoint"])
    plan = make_plan(ROOT / argv[2])  # workingDir /app is the repository
    gpus = sum(int(g["rayStartParams"]["num-gpus"]) * g["replicas"]
               for g in job["spec"]["rayClusterSpec"]["workerGroupSpecs"])
    need = max(r.spec.resources.workers * r.spec.resources.gpus for r in plan.runs)
    assert need <= gpus, f"{argv[2]} needs {need} GPUs per trial, the manifest has {gpus}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_sbatch_script_is_valid_bash_with_the_ray_start_pattern() -> None:
    assert subprocess.run(["bash", "-n", str(SBATCH)], capture_output=True).returncode == 0
    text = SBATCH.read_text()
    assert "ray start --head" in text and "ray start --address=" in text
    assert text.count("--block") == 2  # each node's Ray lives as long as its srun step
    assert 'orchestrator submit "$SWEEP" --address "$HEAD_IP:$PORT" --db "$GATESWEEP_DB"' \
        in text
    assert "#SBATCH --signal=B:TERM" in text  # time limit -> the driver cancels cleanly
