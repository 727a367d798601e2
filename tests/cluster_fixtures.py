"""Pytest plugin: Ray clusters for the scale-out tests, cleaned up to the last process.

- ``ray_local`` (module): ``ray.init`` of a 2-CPU local cluster in its own short temp dir, with
  the trial environment (DS_ACCELERATOR, TORCH_EXTENSIONS_DIR, ...) in the runtime env; yields
  its GCS address.
- ``ray_two_nodes`` (one per worker, up while its users run): two Ray nodes started with the
  real CLI, ``ray start --head`` and ``ray start --address`` on their own ports and temp dir,
  1 CPU each plus a custom resource per node (``node_a`` / ``node_b``); yields a ``TwoNodes``
  with the GCS address. ``ray_two_nodes_fresh``: the same, per test, for a test that breaks
  its cluster (``kill_node``: a lost node). ``ray_two_nodes_jobs``: the same, per test, with
  the dashboard (Ray's Jobs API, for ``submit --detach``) on the head and its address in
  ``TwoNodes``.
  No node runs Ray's log monitor and only the Jobs cluster runs a dashboard: our drivers never
  ask for worker logs (``log_to_driver=False``), and the two cost ~180 CPU-seconds of a
  25-minute suite on 2 cores (the monitor re-reads every worker's log file 10 times a second).
  Teardown stops exactly the processes whose command line names that temp dir (never ``ray
  stop``, which would stop other people's clusters on a shared machine).

Register with ``pytest_plugins = ["db_fixtures", "cluster_fixtures"]`` in tests/conftest.py;
until then the test modules import the fixtures by name.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port

RAY_BIN = str(Path(sys.executable).with_name("ray"))

# A small sweep for the cluster tests (format with name, preset, steps, seq, variants and
# retries: 0 unless a test retries).
CLUSTER_SWEEP = """\
name: {name}
base:
  model: {{preset: {preset}}}
  train: {{steps: {steps}, batch_size: 4, seq_len: {seq}, warmup: 2, eval_every: 0,
          eval_batches: 1, log_every: 5, checkpoint_every: 10}}
  eval: {{probes: [attention_sink]}}
variants:
{variants}
seeds: [0]
resources: {{cpus: 1}}
retries: {retries}
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", DS_ACCELERATOR="cpu")
    env.pop("RAY_ADDRESS", None)
    return env


@pytest.fixture(scope="module")
def ray_local() -> Iterator[str]:
    """The local cluster's GCS address: a ``submit --address`` of the same module joins it."""
    import ray

    from orchestrator.run.env import driver_defaults, worker_env_vars

    driver_defaults()
    tmp = tempfile.mkdtemp(prefix="gsrt", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=tmp, log_to_driver=False,
             runtime_env={"env_vars": worker_env_vars()}, configure_logging=False)
    try:
        yield str(ray.get_runtime_context().gcs_address)
    finally:
        ray.shutdown()
        _kill_processes_naming(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def jobs_api_missing() -> str | None:
    """Why Ray's Jobs API (the dashboard) cannot run here, or None when it can."""
    from ray._private.utils import get_dashboard_dependency_error

    err = get_dashboard_dependency_error()
    return None if err is None else f"ray[default] is not installed ({err})"


@dataclass
class TwoNodes:
    address: str  # 127.0.0.1:PORT (GCS)
    temp_dir: str
    dashboard: str | None  # http://127.0.0.1:PORT (the Jobs API, for submit --detach), or None


def _ray_start(*args: str) -> None:
    res = subprocess.run([RAY_BIN, "start", *args], env=_env(), capture_output=True, text=True,
                         timeout=180)
    if res.returncode != 0:
        raise RuntimeError(f"ray start {' '.join(args)} failed:\n{res.stdout}\n{res.stderr}")


# Worker port blocks: blocks of 200 ports from 20000 up to the kernel's ephemeral range (32768 on
# Linux by default), where free_port() answers and outgoing connections take their local port.
# A block is claimed with an flock held while its node lives (the kernel drops it if the test
# process dies), so no two live test nodes, of any xdist worker, share worker ports.
# (Before: 20000 + a free port % 20000, ranges that reached into the ephemeral range and could
# overlap another node's.)
WORKER_PORT_BASE, WORKER_PORT_BLOCK = 20000, 200
_PORT_LOCKS = Path(tempfile.gettempdir()) / "gatesweep-test-ray-ports"


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _claim_worker_ports(stack: contextlib.ExitStack) -> tuple[int, int]:
    """(min, max) worker port of a block no other live test node holds."""
    _PORT_LOCKS.mkdir(exist_ok=True)
    blocks = (_ephemeral_low() - WORKER_PORT_BASE) // WORKER_PORT_BLOCK
    for block in range(blocks):
        fd = os.open(_PORT_LOCKS / f"block-{block}", os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        stack.callback(os.close, fd)  # closing releases the lock
        low = WORKER_PORT_BASE + block * WORKER_PORT_BLOCK
        return low, low + WORKER_PORT_BLOCK - 1
    raise RuntimeError(f"all {blocks} worker port blocks below the ephemeral range are held "
                       f"({_PORT_LOCKS})")


def _node_ports(stack: contextlib.ExitStack) -> list[str]:
    """Distinct ports for one node's services, so two nodes on one machine never collide."""
    ports = [free_port() for _ in range(3)]
    low, high = _claim_worker_ports(stack)
    return ["--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1]),
            "--min-worker-port", str(low), "--max-worker-port", str(high),
            "--dashboard-agent-listen-port", str(ports[2])]


def start_node(args: list[str], stack: contextlib.ExitStack, head_dir: str | None = None,
               tries: int = 3) -> int:
    """``ray start *args`` with fresh ports and its own worker port block (held on ``stack``
    until the caller stops the node); with ``head_dir`` (its ``--temp-dir``) a head on a fresh
    GCS port, which it returns (0 for a worker node). A node that misses Ray's fixed 30 s
    start-up window (a loaded machine) is stopped and started again on new ports: a head like
    a whole cluster (stop_processes), a worker node by its node-manager port."""
    failures = 0
    while True:
        node = contextlib.ExitStack()
        gcs = free_port() if head_dir else 0
        head = ["--head", "--port", str(gcs)] if head_dir else []
        ports = _node_ports(node)
        try:
            _ray_start(*head, *args, *ports)
        except RuntimeError:
            if head_dir:
                stop_processes(head_dir, gcs)
            else:
                _kill_processes_naming(f"--node_manager_port={ports[1]}")
            node.close()
            failures += 1
            if failures == tries:
                raise
            continue
        stack.enter_context(node)
        return gcs


def stop_processes(temp_dir: str, gcs_port: int) -> None:
    """Every process of the cluster whose head has ``temp_dir``: those that name it (Ray passes
    the session dir to each) and, with ray[default], the Ray Client server, which names only
    the GCS port and outlives the head (reparented to init)."""
    _kill_processes_naming(temp_dir)
    if gcs_port:
        _kill_processes_naming("ray.util.client.server --address=", also=f":{gcs_port} ")


@contextlib.contextmanager
def two_nodes(jobs_api: bool = False) -> Iterator[TwoNodes]:
    tmp = tempfile.mkdtemp(prefix="gscl", dir="/tmp")  # short: socket paths <= 107 chars
    dash = free_port()
    port = 0
    ports = contextlib.ExitStack()  # the worker port blocks, released after the nodes stop
    try:
        # With ``jobs_api`` the head runs the dashboard when ray[default]'s packages are there:
        # Ray's Jobs API (submit --detach) lives in it.
        dash_args = (["--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                      "--dashboard-port", str(dash)] if jobs_api and jobs_api_missing() is None
                     else ["--include-dashboard", "false"])
        quiet = ["--include-log-monitor", "false", "--disable-usage-stats"]
        port = start_node(["--num-cpus", "1", "--num-gpus", "0", "--resources", '{"node_a": 1}',
                           "--temp-dir", tmp, *dash_args, *quiet], ports, head_dir=tmp)
        start_node(["--address", f"127.0.0.1:{port}", "--num-cpus", "1", "--num-gpus", "0",
                    "--resources", '{"node_b": 1}', "--temp-dir", tmp, *quiet], ports)
        yield TwoNodes(f"127.0.0.1:{port}", tmp,
                       f"http://127.0.0.1:{dash}" if "--dashboard-port" in dash_args else None)
    finally:
        stop_processes(tmp, port)
        ports.close()
        shutil.rmtree(tmp, ignore_errors=True)


class _Shared:
    """The worker's one two-node cluster for every test that leaves it whole (its start is
    ~12 s of the slow suite each time), up only while tests that use it run: it is stopped
    when the next test this worker runs does not ask for it, and started again if a later one
    does (what an idle cluster cost: docs/testing.md, "A shared cluster only while its tests
    run")."""

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()  # reusable: close() empties it
        self._nodes: TwoNodes | None = None

    def get(self) -> TwoNodes:
        if self._nodes is None:
            self._nodes = self._stack.enter_context(two_nodes())
        return self._nodes

    def stop(self) -> None:
        self._stack.close()
        self._nodes = None


_SHARED = _Shared()


@pytest.fixture
def ray_two_nodes() -> TwoNodes:
    """The worker's shared cluster (``_Shared``)."""
    return _SHARED.get()


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    # xdist hands a worker its next test before this one ends, so ``nextitem`` is known
    if nextitem is None or "ray_two_nodes" not in getattr(nextitem, "fixturenames", ()):
        _SHARED.stop()


def pytest_sessionfinish() -> None:
    _SHARED.stop()


@pytest.fixture
def ray_two_nodes_fresh() -> Iterator[TwoNodes]:
    """A cluster of its own, for a test that breaks it (node loss)."""
    with two_nodes() as cluster:
        yield cluster


@pytest.fixture
def ray_two_nodes_jobs() -> Iterator[TwoNodes]:
    """A cluster of its own with Ray's Jobs API (the dashboard), for ``submit --detach``."""
    if (why := jobs_api_missing()) is not None:
        pytest.skip(f"submit --detach needs Ray's Jobs API: {why}")
    with two_nodes(jobs_api=True) as cluster:
        yield cluster


def kill_node(node_id_prefix: str) -> list[int]:
    """SIGKILL a node's raylet (``--node_id=<id>`` on its command line) and everything under
    it (its workers): a lost node."""
    pids = _pids_naming(f"--node_id={node_id_prefix}")
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def _pids_naming(needle: str, also: str = "") -> list[int]:
    """Processes whose command line contains ``needle``, plus all their descendants (Ray's
    workers rename themselves to ``ray::...``, so only their parentage ties them to us)."""
    found: set[int] = set()
    parent: dict[int, int] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        parent[int(proc.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if needle in cmd and also in cmd + " ":
            found.add(int(proc.name))
    grew = True
    while grew:
        kids = {pid for pid, pp in parent.items() if pp in found and pid not in found}
        found |= kids
        grew = bool(kids)
    return sorted(found)


def _kill_processes_naming(needle: str, grace_s: float = 5.0, also: str = "") -> None:
    """SIGTERM, then SIGKILL, every process whose command line contains ``needle`` (our
    cluster's unique temp dir; Ray passes the session dir to each of its processes)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids_naming(needle, also)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
            time.sleep(0.1)
        if not pids:
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return True
