"""deploy/kuberay/rayjob.yaml against KubeRay's own RayJob schema (a real Kubernetes cannot run
here): the CRD of a pinned KubeRay release is vendored under tests/data/kuberay (README: source,
tag, commit, sha256) and the manifest's RayJob is validated against its ``ray.io/v1`` openAPI v3
schema, the way the API server validates it.

The API server with kubectl's default strict field validation refuses fields the schema does
not declare; plain JSON Schema allows them. So every object schema that declares its
properties (and neither ``additionalProperties`` nor ``x-kubernetes-preserve-unknown-fields``)
is closed before validating. ``nullable: true`` admits null, as Kubernetes reads it. Not
checked: the CRD's CEL rules (``x-kubernetes-validations``: deletionStrategy and managedBy,
fields the manifest does not use), string formats, and ``metadata`` (ObjectMeta, which the API
server validates itself)."""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RAYJOB = ROOT / "deploy" / "kuberay" / "rayjob.yaml"
CRD_DIR = ROOT / "tests" / "data" / "kuberay"
CRD = CRD_DIR / "ray.io_rayjobs.yaml"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRD is 1.4 MB: C parser, 1.3 s


def _closed(node: Any) -> Any:
    """The schema as the API server applies it: undeclared fields refused, nullable admits
    null (a copy; the vendored document is left as released)."""
    if isinstance(node, list):
        return [_closed(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    if out.get("nullable") and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    return out


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    pinned = re.search(r"sha256: `([0-9a-f]{64})`", (CRD_DIR / "README.md").read_text())
    assert pinned, "tests/data/kuberay/README.md names no sha256"
    assert hashlib.sha256(CRD.read_bytes()).hexdigest() == pinned.group(1), \
        f"{CRD} is not the vendored release (edited by hand?)"
    doc: dict[str, Any] = yaml.load(CRD.read_text(), Loader=LOADER)  # noqa: S506 - safe loader
    return doc


def _validator(crd: dict[str, Any], version: str) -> jsonschema.Draft4Validator:
    (v,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    # openAPI v3.0 schemas follow JSON Schema draft 4 (boolean exclusiveMinimum/Maximum)
    return jsonschema.Draft4Validator(_closed(v["schema"]["openAPIV3Schema"]))


def _rayjob() -> dict[str, Any]:
    (job,) = [d for d in yaml.safe_load_all(RAYJOB.read_text()) if d and d["kind"] == "RayJob"]
    assert isinstance(job, dict)
    return job


def _errors(crd: dict[str, Any], job: dict[str, Any]) -> list[str]:
    group, version = job["apiVersion"].split("/")
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in _validator(crd, version).iter_errors(job)]


def test_the_rayjob_manifest_matches_the_pinned_kuberay_crd(crd: dict[str, Any]) -> None:
    job = _rayjob()
    group, version = job["apiVersion"].split("/")
    assert (group, job["kind"]) == (crd["spec"]["group"], crd["spec"]["names"]["kind"])
    served = {v["name"]: v for v in crd["spec"]["versions"]}
    assert served[version]["served"] and not served[version].get("deprecated"), version
    assert _errors(crd, job) == []


@pytest.mark.parametrize("path, value, expect", [
    (("spec", "shutdownAfterJobFinishe"), True, "'shutdownAfterJobFinishe' was unexpected"),
    (("spec", "rayClusterSpec", "workerGroupSpecs", 0, "replicas"), "8", "'8' is not of type"),
    (("spec", "rayClusterSpec", "workerGroupSpecs", 0, "rayStartParams", "num-gpus"), 8,
     "8 is not of type 'string'"),
    (("spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "containers", 0, "imag"),
     "x", "'imag' was unexpected"),
], ids=["typo", "replicas-as-string", "num-gpus-as-int", "pod-field-typo"])
def test_the_check_refuses_what_the_api_server_refuses(
        crd: dict[str, Any], path: tuple[str | int, ...], value: Any, expect: str) -> None:
    """The validation has teeth: a misspelt field, anywhere down to the pod template, and a
    wrong type each fail, naming where."""
    job = copy.deepcopy(_rayjob())
    node: Any = job
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    errors = _errors(crd, job)
    where = ".".join(str(p) for p in path[:-1]) if "unexpected" in expect else \
        ".".join(str(p) for p in path)
    assert any(e.startswith(f"{where}:") and expect in e for e in errors), errors
