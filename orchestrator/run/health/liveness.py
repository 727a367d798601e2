"""Is a silent attempt's process dead, stopped, hung, or only starved? (docs/cluster.md 5)

A heartbeat that went stale says only that the attempt's heartbeat thread wrote nothing for
a staleness window. On a loaded node that is not a death: Ray runs trials at nice 15, so busy
processes at nice 0 leave a trial a few per cent of a core, and a stretch of 150 ms of CPU
work under the GIL (DeepSpeed's first start: dlopen of its ops, building the engine) then
takes seconds of wall time while the heartbeat thread waits for the GIL. Before the driver
records an attempt dead it therefore looks at the process itself (its recorded pid, on its
recorded host) in /proc:

- gone, or a zombie          -> dead now
- stopped (SIGSTOP, ptrace)  -> dead now (a stopped process makes no progress, whatever load)
- its CPU time (the process and its descendants: DeepSpeed compiles its ops in child
  processes) advanced since the last look -> alive but starved: wait
- no CPU for a whole look interval -> hung (a deadlock, a hung file system): dead
- alive but silent past ``max_silent_s`` -> dead (a busy loop that starves its own heartbeat
  thread forever is a hang too)

The first look at a silent attempt only records its CPU time, so a hung process is caught
one look after it went stale; a stopped or vanished one at once. On another machine the look
runs there, as a zero-CPU Ray task pinned to the attempt's node; when that does not answer in
time the heartbeat alone decides, as before.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from orchestrator.run.cluster import parse_host_label

# /proc/<pid>/stat states that make no progress until someone else acts
_STOPPED = frozenset("Tt")
_DEAD = frozenset("ZXx")


class Liveness(Enum):
    GONE = "gone"  # no such process, or a zombie
    STOPPED = "stopped"  # SIGSTOP / traced
    BUSY = "busy"  # its CPU time advanced: alive, only starved
    HUNG = "hung"  # no CPU for a whole look interval
    FIRST = "first look"  # nothing to compare with yet
    UNKNOWN = "unknown"  # the process could not be looked at (another host that did not answer)


@dataclass(frozen=True)
class Sample:
    state: str  # /proc/<pid>/stat's state letter
    cpu_s: float  # user + system CPU seconds of the process and its live descendants


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) from /proc/<pid>/stat, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # "pid (comm) S ppid ...": comm may hold spaces and ')' -- split after the last ')'
    fields = raw[raw.rfind(")") + 2:].split()
    return fields[0], int(fields[1])


def _cpu_s(pid: int) -> float:
    """CPU seconds the threads of ``pid`` have run, to the nanosecond (schedstat). The
    utime/stime of /proc/<pid>/stat are sampled at clock ticks: a starved process running
    a few ms at a time can go a whole second without being charged one, and would look hung."""
    total = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0]) / 1e9
            except (OSError, ValueError, IndexError):
                continue  # the thread ended while we looked
    except OSError:
        pass
    return total


def sample(pid: int) -> Sample | None:
    """The process ``pid`` now: its state and the CPU time of its tree; None when it is gone."""
    own = _stat(pid)
    if own is None:
        return None
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(int(entry.name))) is not None:
            children.setdefault(st[1], []).append(int(entry.name))
    total, todo = _cpu_s(pid), list(children.get(pid, []))
    while todo:
        p = todo.pop()
        total += _cpu_s(p)
        todo.extend(children.get(p, []))
    return Sample(own[0], total)


def making_progress(before: Sample | None, now: Sample | None) -> bool:
    """Did the process run between two samples (and is it neither stopped nor gone)?"""
    return (before is not None and now is not None and now.state not in _STOPPED | _DEAD
            and now.cpu_s > before.cpu_s)


def _sample_remote(node_prefix: str, pid: int, timeout_s: float) -> Sample | None | Liveness:
    """``sample(pid)`` run on the Ray node whose id starts with ``node_prefix``;
    Liveness.UNKNOWN when Ray cannot say (no such node, no answer in ``timeout_s``)."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if not ray.is_initialized():
            return Liveness.UNKNOWN
        node = next((str(n["NodeID"]) for n in ray.nodes()
                     if str(n.get("NodeID", "")).startswith(node_prefix) and n.get("Alive")),
                    None)
        if node is None:
            return Liveness.UNKNOWN
        probe = ray.remote(num_cpus=0, max_retries=0)(sample).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False))
        out: Sample | None = ray.get(probe.remote(pid), timeout=timeout_s)
        return out
    except Exception:  # noqa: BLE001 - the look failed: the heartbeat alone decides
        return Liveness.UNKNOWN


class LivenessWatch:
    """Looks at silent attempts' processes; remembers each one's CPU time between looks."""

    def __init__(self, max_silent_s: float, remote_timeout_s: float = 5.0) -> None:
        self.max_silent_s, self.remote_timeout_s = max_silent_s, remote_timeout_s
        self._last: dict[int, tuple[float, float]] = {}  # attempt id -> (monotonic, cpu_s)
        self._here = socket.gethostname()

    def look(self, attempt_id: int, host: str, pid: int | None, silent_s: float) -> Liveness:
        """How the process of the attempt ``attempt_id`` (``pid`` on ``host``, an
        attempts.host label) is doing, ``silent_s`` seconds after its last heartbeat."""
        if pid is None:
            return Liveness.UNKNOWN
        hostname, node = parse_host_label(host)
        got = (sample(pid) if hostname == self._here
               else _sample_remote(node, pid, self.remote_timeout_s) if node
               else Liveness.UNKNOWN)
        if isinstance(got, Liveness):
            return got
        if got is None or got.state in _DEAD:
            return Liveness.GONE
        if got.state in _STOPPED:
            return Liveness.STOPPED
        now = time.monotonic()
        before = self._last.get(attempt_id)
        self._last[attempt_id] = (now, got.cpu_s)
        if before is None:
            return Liveness.FIRST
        if got.cpu_s <= before[1]:
            return Liveness.HUNG
        return Liveness.HUNG if silent_s > self.max_silent_s else Liveness.BUSY

    def forget(self, attempt_id: int) -> None:
        self._last.pop(attempt_id, None)
