"""Cluster sizing: trial placement, concurrency, parallelism checks and the storage path.

A single-worker run is one Tune trial holding ``{CPU: cpus, GPU: gpus}``. A multi-worker run
(``resources.workers > 1``) is a Tune trial that only coordinates (``{CPU: 0.01}``) plus a Ray
Train worker group of ``workers`` bundles of ``{CPU: cpus, GPU: gpus}`` that Train reserves
itself. Concurrency therefore counts *worker slots* per node: a bundle cannot straddle nodes.

Storage: checkpoints must be readable by whichever node runs the next attempt, so on a
multi-node cluster the path must be shared (NFS/Lustre/... mounted at the same path on every
node) or an fsspec/pyarrow URL (``s3://``, ``gs://``); see docs/cluster.md.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.config import Resources, RunSpec
from contract.errors import UserError

COORDINATOR_CPU = 0.01  # what the Tune trial of a multi-worker run holds while Train works
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "cephfs", "ceph",
              "glusterfs", "fuse.glusterfs", "fuse.juicefs", "fuse.s3fs", "fuse.gcsfuse",
              "wekafs", "9p")


@dataclass(frozen=True)
class NodeResources:
    node_id: str
    ip: str
    cpus: float
    gpus: float


def is_multiworker(resources: Resources) -> bool:
    return resources.workers > 1


def trial_bundles(resources: Resources) -> list[dict[str, float]]:
    """The Tune trial's own placement-group bundles."""
    if is_multiworker(resources):
        return [{"CPU": COORDINATOR_CPU}]
    return [{"CPU": resources.cpus, "GPU": resources.gpus}]


def worker_bundle(resources: Resources) -> dict[str, float]:
    """One Ray Train worker's resources (``ScalingConfig.resources_per_worker``)."""
    bundle = {"CPU": resources.cpus}
    if resources.gpus > 0:
        bundle["GPU"] = resources.gpus
    return bundle


def live_nodes() -> list[NodeResources]:
    """The alive nodes of the connected Ray cluster (``ray.init`` must have run)."""
    import ray

    return [NodeResources(n["NodeID"], n.get("NodeManagerAddress", ""),
                          float(n["Resources"].get("CPU", 0)), float(n["Resources"].get("GPU", 0)))
            for n in ray.nodes() if n.get("Alive")]


def _slots(node: NodeResources, r: Resources) -> int:
    """How many worker bundles of ``r`` fit on ``node`` (CPU and GPU both)."""
    n = int(node.cpus // r.cpus)
    if r.gpus > 0:
        n = min(n, int(node.gpus // r.gpus))
    return n


def _after_coordinator(nodes: Sequence[NodeResources], r: Resources) -> list[NodeResources]:
    """The nodes as a multi-worker trial sees them: its coordinator's 0.01 CPU sits on one
    node (the largest, conservatively), and a worker bundle cannot use that sliver."""
    if not is_multiworker(r) or not nodes:
        return list(nodes)
    big = max(range(len(nodes)), key=lambda i: nodes[i].cpus)
    return [NodeResources(n.node_id, n.ip, n.cpus - COORDINATOR_CPU, n.gpus) if i == big else n
            for i, n in enumerate(nodes)]


def check_fits(resources: Resources, nodes: Sequence[NodeResources], run: str = "") -> None:
    """One worker must fit on one node, and all workers on the cluster; else a clear error."""
    who = f"run {run}: " if run else ""
    nodes = _after_coordinator(nodes, resources)
    if not any(_slots(n, resources) >= 1 for n in nodes):
        big = max(nodes, key=lambda n: (n.cpus, n.gpus), default=NodeResources("", "", 0, 0))
        raise UserError(f"{who}resources.cpus={resources.cpus:g}, resources.gpus="
                        f"{resources.gpus:g} per worker does not fit on any node (largest: "
                        f"{big.cpus:g} CPUs, {big.gpus:g} GPUs)")
    total = sum(_slots(n, resources) for n in nodes)
    if total < resources.workers:
        raise UserError(f"{who}resources.workers={resources.workers} needs {resources.workers} "
                        f"worker slots of {worker_bundle(resources)}; the cluster has {total}")


def max_concurrent_trials(resources: Sequence[Resources], nodes: Sequence[NodeResources],
                          requested: int | None = None) -> int:
    """max_concurrent_trials for a sweep: the request, else how many of the *largest* trials
    the cluster's worker slots hold at once (at least 1, at most the number of trials)."""
    if not resources:
        return 1
    for r in resources:
        check_fits(r, nodes)
    if requested:
        return requested
    # Size by the most demanding trial: mixing sizes then never oversubscribes.
    biggest = max(resources, key=lambda r: (r.workers * r.gpus, r.workers * r.cpus))
    slots = sum(_slots(n, biggest) for n in _after_coordinator(nodes, biggest))
    return max(1, min(len(resources), slots // biggest.workers))


def check_parallelism(spec: RunSpec) -> None:
    """Expert parallelism must divide the worker count (DeepSpeed groups ranks by ep_size)."""
    moe, workers = spec.model.moe, spec.resources.workers
    if moe is None or moe.ep_size == 1:
        return
    if workers % moe.ep_size:
        raise UserError(f"run {spec.name}: model.moe.ep_size={moe.ep_size} must divide "
                        f"resources.workers={workers} (DeepSpeed splits the ranks into "
                        f"expert-parallel groups of ep_size)")


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def validate_storage(path: str | Path) -> str:
    """An absolute, writable local/NFS path (created if missing) or an fsspec/pyarrow URL.

    Returns the normalised path/URL; raises UserError naming ``--storage`` otherwise.
    """
    raw = str(path)
    if _is_url(raw):
        scheme = raw.split("://", 1)[0]
        try:
            import pyarrow.fs

            pyarrow.fs.FileSystem.from_uri(raw)
        except Exception as exc:  # noqa: BLE001 - any resolver failure is the user's to fix
            raise UserError(f"--storage {raw}: cannot open the {scheme}:// file system "
                            f"({exc}); use a path every node mounts, or a URL pyarrow "
                            "supports (s3://, gs://, hdfs://)") from None
        return raw
    local = Path(raw.removeprefix("file://")).expanduser().resolve()
    try:
        local.mkdir(parents=True, exist_ok=True)
        probe = local / f".gatesweep-write-test-{uuid.uuid4().hex[:8]}"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"--storage {raw}: not a writable directory ({exc.strerror or exc})") \
            from None
    return str(local)


def filesystem_type(path: str | Path, mounts: str = "/proc/mounts") -> str:
    """The file-system type of the mount holding ``path`` ("" when unknown)."""
    target = str(Path(path).resolve())
    best, kind = "", ""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        mnt = parts[1].replace("\\040", " ")
        inside = target == mnt or target.startswith(mnt.rstrip("/") + "/")
        if inside and len(mnt) >= len(best):
            best, kind = mnt, parts[2]
    return kind


def storage_warning(path: str, nodes: Sequence[NodeResources]) -> str | None:
    """A warning when several machines share a cluster but the storage is machine-local."""
    machines = {n.ip for n in nodes}
    if len(machines) <= 1 or _is_url(path):
        return None
    kind = filesystem_type(path)
    if kind in NETWORK_FS:
        return None
    return (f"--storage {path} is on a local '{kind or 'unknown'}' file system but the cluster "
            f"spans {len(machines)} machines: a retried or rerun attempt on another node will "
            "not find its checkpoint; use an NFS path mounted on every node or an s3:// URL")


def host_label() -> str:
    """``hostname/<ray node id prefix>``: which node an attempt ran on (attempts.host).

    Several Ray nodes can share a machine (and its hostname); the node id tells them apart.
    """
    host = socket.gethostname()
    try:
        import ray

        if ray.is_initialized():
            return f"{host}/{ray.get_runtime_context().get_node_id()[:12]}"
    except Exception:  # noqa: BLE001, S110 - outside Ray: the hostname alone
        pass
    return host


def parse_host_label(label: str) -> tuple[str, str]:
    """host_label's inverse: (hostname, Ray node id prefix, '' outside Ray)."""
    host, _, node = label.partition("/")
    return host, node


def resolve_address(address: str | None) -> str | None:
    """``--address``, else RAY_ADDRESS, else None (start a local cluster)."""
    return address or os.environ.get("RAY_ADDRESS") or None


REACH_TIMEOUT_S = 3.0
# Ports Ray listens on when an address names none: the Ray Client server, the GCS.
CLIENT_PORT, GCS_PORT = 10001, 6379


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4


def _grpc_answers(host: str, port: int, timeout_s: float) -> None:
    """Raise OSError unless an HTTP/2 (gRPC) server answers at host:port within timeout_s:
    the Ray Client server and the GCS both speak gRPC, and answer a client preface with a
    SETTINGS frame. A bare TCP connect is not enough: a proxy or firewall may accept it."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(_H2_PREFACE)
        head = b""
        while len(head) < 9:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = sock.recv(9 - len(head))
            if not chunk:
                raise ConnectionError(0, "closed without an answer")
            head += chunk
    if head[3] != _H2_SETTINGS:
        raise ConnectionError(0, "not a Ray (gRPC) server")


def check_reachable(address: str | None, timeout_s: float = REACH_TIMEOUT_S) -> None:
    """That something answers at the cluster ``address`` (after resolve_address), within
    ``timeout_s``: Ray's own connect waited for over 90 s on an unreachable head, and `rerun`
    had already set its runs back to pending by then. A TCP connect to its host and port;
    "auto"/"local" (Ray finds or starts the cluster itself), other schemes than ray:// and no
    address are not checked."""
    if address is None or address in ("auto", "local"):
        return
    scheme, _, rest = address.rpartition("://")
    if scheme not in ("", "ray"):  # another protocol: Ray's own connect judges it
        return
    hostport = rest.split("/", 1)[0]
    host, sep, port = hostport.rpartition(":")
    if not sep:
        host, port = hostport, str(CLIENT_PORT if scheme == "ray" else GCS_PORT)
    host = host.strip("[]")  # [::1]:10001
    if not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--address {address!r}: expected ray://HOST:PORT or HOST:PORT")
    try:
        _grpc_answers(host, int(port), timeout_s)
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise UserError(f"--address {address}: the Ray cluster cannot be reached at "
                        f"{host}:{port} ({why} within {timeout_s:g} s); nothing was changed. "
                        "Check the address (or RAY_ADDRESS), or leave it out to run on a "
                        "local cluster") from None


def scaling_kwargs(resources: Resources, gpus_in_cluster: float) -> dict[str, Any]:
    """Arguments of ``ray.train.ScalingConfig`` for a run (use_gpu when it asks for GPUs)."""
    use_gpu = resources.gpus > 0
    if use_gpu and gpus_in_cluster <= 0:
        raise UserError(f"resources.gpus={resources.gpus:g} per worker, but the cluster has "
                        "no GPUs; set resources.gpus: 0 to train on CPUs")
    return {"num_workers": resources.workers, "use_gpu": use_gpu,
            "resources_per_worker": worker_bundle(resources)}
