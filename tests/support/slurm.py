"""A throwaway single-host Slurm cluster for the slow tests (Debian's slurm-wlm and munge).

``start_slurm(nodes=2)`` starts, in a fresh short temp dir: ``munged`` with its own key and
socket, ``slurmctld`` and one ``slurmd`` per node, each a foreground child of the test. Every
slurmd is its own Slurm node (``slurmd -N nX``, its own ``Port=``): Debian's 22.05 slurmd runs
several per host. The cluster's own slurm.conf has free ports, its state and spool dirs under the
temp dir, proctrack/linuxproc and task/none (no cgroups: they need a systemd-managed cgroup tree),
select/cons_tres over CPUs only. Clients (sbatch, squeue, scancel) find it through
``SLURM_CONF`` in ``SlurmCluster.env()``.

Every process the cluster starts, daemons and job steps alike, carries ``MARKER=<temp dir>`` in
its environment (the daemons get it from us, job steps from the submitting environment, Ray's
processes from their parents). ``stop_slurm`` cancels the jobs, stops the daemons, then kills
whatever still carries the marker (slurmstepd and what proctrack/linuxproc loses when a job's
process tree is reparented) and removes the dir: nothing of it outlives the test, and nothing
of anyone else's is touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port

MARKER = "GATESWEEP_TEST_SLURM"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol", "srun")
START_S = 60.0  # slurmctld answering and every node idle; ~2 s on the 2-core VM


def missing_binaries() -> list[str]:
    """The Slurm and munge programs this module needs that are not installed."""
    path = f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin"
    return [b for b in (*DAEMONS, "mungekey") if shutil.which(b, path=path) is None]


@dataclass
class SlurmCluster:
    root: Path
    nodes: list[str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)  # by daemon

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment for Slurm's clients and for jobs: our slurm.conf and the marker."""
        env = dict(os.environ if base is None else base)
        env.update(SLURM_CONF=str(self.conf), **{MARKER: str(self.root)})
        env["PATH"] = f"{env.get('PATH', '')}:/usr/sbin:/sbin"
        return env

    def run(self, *argv: str, timeout: float = 30, env: dict[str, str] | None = None) -> str:
        """A Slurm client command against this cluster (in ``env``, made with ``env()``);
        its stdout (raises with stderr)."""
        res = subprocess.run(list(argv), env=env or self.env(), capture_output=True, text=True,
                             timeout=timeout)
        if res.returncode:
            raise RuntimeError(f"{' '.join(argv)} failed ({res.returncode}): "
                               f"{res.stderr.strip() or res.stdout.strip()}")
        return res.stdout

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job``'s fields (JobState, ExitCode, NodeList, ...); {} once the
        controller forgot the job (MinJobAge after its end)."""
        try:
            out = self.run("scontrol", "show", "job", "-o", str(job_id))
        except RuntimeError:
            return {}
        return dict(f.split("=", 1) for f in out.split() if "=" in f)

    def wait_job_end(self, job_id: int, timeout: float) -> dict[str, str]:
        """Wait until the job left the queue (every step ended); its final fields."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info.get("JobState") not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING",
                                            "SUSPENDED"):
                return info
            time.sleep(0.5)
        raise AssertionError(f"Slurm job {job_id} still {self.job(job_id).get('JobState')} "
                             f"after {timeout:g} s")


def _conf(root: Path, nodes: list[str], cpus: int, ports: list[int]) -> str:
    host = socket.gethostname()
    lines = [
        "ClusterName=gstest",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={root}/munge.sock",
        "CredType=cred/munge",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        f"PlugStackConfig={root}/plugstack.conf",  # not the host's /etc/slurm one
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin",
        "MailProg=/bin/true",
        "ReturnToService=2",
        # The nodes say the CPUs we configure (the host has fewer: they share its cores).
        "SlurmdParameters=config_overrides",
        "KillWait=5",  # SIGTERM -> SIGKILL of a job's steps (default 30 s): Ray drains 30 s
        "MinJobAge=600",  # a finished job's state and exit code stay readable
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
    ]
    lines += [f"NodeName={n} NodeHostname={host} NodeAddr=127.0.0.1 Port={p} CPUs={cpus} "
              "State=UNKNOWN" for n, p in zip(nodes, ports[2:], strict=True)]
    lines.append(f"PartitionName=gs Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE "
                 "State=UP")
    return "\n".join(lines) + "\n"


def start_slurm(nodes: int = 2, cpus: int = 1) -> SlurmCluster:
    """munged + slurmctld + ``nodes`` slurmd daemons, each node ``cpus`` CPUs, all idle."""
    root = Path(tempfile.mkdtemp(prefix="gsslurm", dir="/tmp"))  # 0700: munged checks it
    cluster = SlurmCluster(root, [f"n{i + 1}" for i in range(nodes)])
    try:
        for sub in ("state", "log", *(f"spool/{n}" for n in cluster.nodes)):
            (root / sub).mkdir(parents=True)
        (root / "plugstack.conf").write_text("")
        ports = [free_port() for _ in range(2 + nodes)]
        cluster.conf.write_text(_conf(root, cluster.nodes, cpus, ports))
        env = cluster.env()
        subprocess.run(["mungekey", "--create", "--keyfile", str(root / "munge.key"),
                        "--bits", "1024"], env=env, check=True, capture_output=True, timeout=30)
        # --force: we are root and the socket dir is private; munged refuses both otherwise
        _daemon(cluster, "munged", ["munged", "--foreground", "--force",
                                    f"--socket={root}/munge.sock",
                                    f"--key-file={root}/munge.key",
                                    f"--pid-file={root}/munged.pid",
                                    f"--log-file={root}/log/munged.log",
                                    f"--seed-file={root}/munge.seed"])
        _wait(lambda: (root / "munge.sock").exists(), "munged's socket", cluster)
        _daemon(cluster, "slurmctld", ["slurmctld", "-D", "-f", str(cluster.conf)])
        _wait(lambda: _answers(cluster), "slurmctld", cluster)
        for node in cluster.nodes:
            _daemon(cluster, f"slurmd-{node}",
                    ["slurmd", "-D", "-N", node, "-f", str(cluster.conf)])
        _wait(lambda: _all_idle(cluster), "every node idle", cluster)
    except BaseException:
        stop_slurm(cluster)
        raise
    return cluster


def _daemon(cluster: SlurmCluster, name: str, argv: list[str]) -> None:
    out = open(cluster.root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - the child owns it
    try:
        cluster.procs[name] = subprocess.Popen(argv, env=cluster.env(), stdout=out,
                                               stderr=subprocess.STDOUT)
    finally:
        out.close()


def _answers(cluster: SlurmCluster) -> bool:
    try:
        cluster.run("scontrol", "ping", timeout=10)
        return True
    except (RuntimeError, subprocess.TimeoutExpired):
        return False


def _all_idle(cluster: SlurmCluster) -> bool:
    try:
        out = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=10)
    except (RuntimeError, subprocess.TimeoutExpired):
        return False
    states = dict(line.split() for line in out.splitlines() if line.strip())
    return all(states.get(n) == "idle" for n in cluster.nodes)


def _wait(ready: Callable[[], bool], what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        dead = [name for name, p in cluster.procs.items() if p.poll() is not None]
        if dead:
            raise RuntimeError(f"Slurm test cluster: {dead[0]} exited while waiting for {what}"
                               f"; logs in {cluster.root / 'log'}:\n{_logs(cluster)}")
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"Slurm test cluster: no {what} within {START_S:g} s:\n{_logs(cluster)}")


def _logs(cluster: SlurmCluster) -> str:
    parts = []
    for f in sorted((cluster.root / "log").glob("*")):
        lines = f.read_text(errors="replace").splitlines()[-15:]
        parts.append(f"--- {f.name}\n" + "\n".join(lines))
    return "\n".join(parts)


def stop_slurm(cluster: SlurmCluster) -> None:
    """Cancel every job, stop the daemons, kill what still carries the marker, remove the dir.
    Safe on a half-started cluster."""
    try:
        jobs = cluster.run("squeue", "-h", "-o", "%A", timeout=10).split()
        if jobs:
            cluster.run("scancel", *jobs, timeout=10)
            for job in jobs:  # KillWait (5 s) + a margin
                cluster.wait_job_end(int(job), timeout=15)
    except (RuntimeError, subprocess.TimeoutExpired, AssertionError):
        pass  # the controller is gone or stuck: the marker sweep below ends its jobs
    for proc in reversed(cluster.procs.values()):  # slurmds, then slurmctld, then munged
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    kill_marked(str(cluster.root))
    shutil.rmtree(cluster.root, ignore_errors=True)


def marked_pids(root: str) -> list[int]:
    """Processes whose environment has ``MARKER=root`` (this process excluded)."""
    want = f"{MARKER}={root}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            env = (proc / "environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if want in env.split(b"\0"):
            found.append(int(proc.name))
    return found


def kill_marked(root: str, rounds: int = 5) -> None:
    """SIGKILL every marked process, again while new ones appear (a parent forking as it dies)."""
    for _ in range(rounds):
        pids = marked_pids(root)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.3)
