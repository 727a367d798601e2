"""orchestrator/run/health/liveness.py on real processes: a busy one is alive however silent (up to
the bound), a sleeping one is hung after one look, a stopped or vanished one is dead at once, and
CPU spent by a child (DeepSpeed compiling its ops) counts for its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from orchestrator.run.health.liveness import Liveness, LivenessWatch, sample

HERE = f"{socket.gethostname()}/abc123"
BUSY = "import time\nwhile True: sum(range(10000))"


@contextmanager
def _proc(code: str) -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.3)
        yield p
    finally:
        p.kill()
        p.wait()


def _cpu_advances(pid: int) -> None:
    """Wait until ``pid``'s tree has used one more clock tick of CPU (at most 5 s)."""
    first = sample(pid)
    assert first is not None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        now = sample(pid)
        assert now is not None
        if now.cpu_s > first.cpu_s:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} used no CPU in 5 s")


def test_a_busy_process_is_alive_until_the_bound_then_hung() -> None:
    watch = LivenessWatch(max_silent_s=60)
    with _proc(BUSY) as p:
        assert watch.look(1, HERE, p.pid, silent_s=10) is Liveness.FIRST
        _cpu_advances(p.pid)
        assert watch.look(1, HERE, p.pid, silent_s=11) is Liveness.BUSY
        _cpu_advances(p.pid)
        assert watch.look(1, HERE, p.pid, silent_s=61) is Liveness.HUNG  # busy, silent too long


def test_a_sleeping_process_is_hung_after_one_look() -> None:
    watch = LivenessWatch(max_silent_s=60)
    with _proc("import time; time.sleep(600)") as p:
        assert watch.look(2, HERE, p.pid, silent_s=10) is Liveness.FIRST
        time.sleep(0.5)
        assert watch.look(2, HERE, p.pid, silent_s=11) is Liveness.HUNG


def test_a_stopped_process_is_dead_at_the_first_look_and_a_gone_one_too() -> None:
    watch = LivenessWatch(max_silent_s=60)
    with _proc(BUSY) as p:
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert watch.look(3, HERE, p.pid, silent_s=10) is Liveness.STOPPED
        os.kill(p.pid, signal.SIGCONT)
    assert watch.look(3, HERE, p.pid, silent_s=10) is Liveness.GONE  # killed and reaped
    assert watch.look(4, HERE, None, silent_s=10) is Liveness.UNKNOWN  # no pid recorded


def test_cpu_of_a_child_counts_for_its_idle_parent() -> None:
    """The parent sleeps in wait() while its child computes (DeepSpeed's op build): busy."""
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BUSY!r}])"
    watch = LivenessWatch(max_silent_s=60)
    with _proc(parent) as p:
        own = sample(p.pid)
        assert own is not None and own.state == "S"  # the parent itself waits
        assert watch.look(5, HERE, p.pid, silent_s=10) is Liveness.FIRST
        _cpu_advances(p.pid)
        assert watch.look(5, HERE, p.pid, silent_s=11) is Liveness.BUSY
        for child in _children(p.pid):
            os.kill(child, signal.SIGKILL)


def test_another_host_without_ray_is_unknown() -> None:
    """No Ray to run the look there: the heartbeat alone decides (as before)."""
    watch = LivenessWatch(max_silent_s=60)
    assert watch.look(6, "some-other-host/abc123", os.getpid(), silent_s=10) is Liveness.UNKNOWN
    assert watch.look(6, "some-other-host", os.getpid(), silent_s=10) is Liveness.UNKNOWN


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                out.append(int(entry))
    return out
