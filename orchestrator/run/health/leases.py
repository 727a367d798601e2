"""The driver's side of the claim protocol (docs/cluster.md "Claims and leases").

While a driver (``submit`` / ``rerun``) lives, a daemon thread every heartbeat interval:
- renews its lease on the runs it means to run (``runs.owner`` / ``runs.lease_until``), so a
  queued run of a *dead* driver (lease ran out) is told apart from one a live driver will
  still start -- ``rerun --sweep`` takes the former and leaves the latter;
- records its own silent attempts promptly: an attempt it claimed whose heartbeat went stale
  (states.stale_after_s of its interval) ends ``failed`` with ``node_lost`` when Ray reports its
  node dead, else ``worker_died`` -- seconds after the death, whether or not Tune retries --
  unless its process is only starved (orchestrator/run/health/liveness.py: still using CPU on a
  loaded node), which is waited for up to states.MAX_SILENT_S;
- watches the DB itself: a tick that cannot reach it is recorded in the driver's
  ``OutageState`` (orchestrator/run/health/dbretry.py; the scheduler stops the sweep once the outage
  outlasts its bound). After an outage nobody could heartbeat, so no attempt is judged
  silent until one full staleness window has passed with the DB answering again. The same
  holds after a renewal that had to wait for the lock (longer than an interval): every other
  writer waited too, so their heartbeats are late through no fault of theirs;
- on SQLite, watches the write lock (orchestrator/run/health/frozen_writer.py): one of its trials
frozen
  inside a write transaction holds it for everyone and is killed, so the sweep goes on.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from contract import env
from contract.states import RunStatus, stale_after_s
from orchestrator.run.cluster import parse_host_label
from orchestrator.run.health.dbretry import OutageState
from orchestrator.run.health.faults import Fault
from orchestrator.run.health.frozen_writer import FrozenWriterWatch
from orchestrator.run.health.liveness import Liveness, LivenessWatch
from results_db import DBUnavailable

if TYPE_CHECKING:
    from results_db import ResultsDB
    from results_db.rows import AttemptRow

MAX_SILENT_S_ENV = "GATESWEEP_MAX_SILENT_S"


def max_silent_s() -> float:
    """GATESWEEP_MAX_SILENT_S, default contract.states.MAX_SILENT_S: how long a silent attempt
    whose process still uses CPU is waited for before it counts as hung."""
    return env.seconds(MAX_SILENT_S_ENV)


def node_fault(host: str, grace_s: float = 0.0) -> Fault:
    """``node_lost`` when the Ray node in ``host`` ("hostname/<node id prefix>") is gone,
    else ``worker_died``. The GCS marks a node dead only after its health checks fail, which
    trails the death by up to ~30 s, so a node whose raylet no longer accepts connections
    counts as lost at once; ``grace_s`` polls that long for either sign."""
    prefix = parse_host_label(host)[1]
    deadline = time.monotonic() + grace_s
    while prefix:
        try:
            import ray

            if not ray.is_initialized():
                break
            node = next((n for n in ray.nodes() if str(n.get("NodeID", "")).startswith(prefix)),
                        None)
            if node is None or not node.get("Alive") or not _raylet_answers(node):
                return Fault.NODE_LOST
        except Exception:  # noqa: BLE001 - the GCS may be unreachable: say what we know
            break
        if time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return Fault.WORKER_DIED


def _raylet_answers(node: dict[str, Any]) -> bool:
    addr, port = node.get("NodeManagerAddress"), node.get("NodeManagerPort")
    if not addr or not port:
        return True  # nothing to test: trust the GCS
    try:
        with socket.create_connection((str(addr), int(port)), timeout=1.0):
            return True
    except OSError:
        return False


class LeaseKeeper:
    """Context manager: renew leases and record silent deaths until the driver is done."""
    def __init__(self, db: ResultsDB, run_ids: list[int], owner: str, heartbeat_s: float,
                 say: Callable[[str], None] | None = None,
                 outage: OutageState | None = None) -> None:
        self.db, self.ids, self.owner, self.heartbeat_s = db, list(run_ids), owner, heartbeat_s
        self.say = say or (lambda _m: None)
        self.outage = outage if outage is not None else OutageState(wait_s=float("inf"))
        self._answering_since = time.monotonic()  # the DB has answered every tick since
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="leases", daemon=True)
        self._frozen = FrozenWriterWatch(db, self.ids, owner, heartbeat_s, self.say)
        self._alive = LivenessWatch(max_silent_s(), remote_timeout_s=stale_after_s(heartbeat_s))
        self._told: set[int] = set()  # attempts whose starving was said once

    def __enter__(self) -> LeaseKeeper:
        self._frozen.start()  # first: a frozen writer would make this very tick wait
        try:
            self.tick()
        except BaseException:
            self._frozen.stop()
            raise
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._frozen.stop()
        self._thread.join(timeout=30)
        try:
            self.tick()  # a death in the last interval is still recorded
            self.db.release_leases(self.ids, self.owner)
        except Exception:  # noqa: BLE001 - never mask the sweep's own outcome
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                self.tick()
            except DBUnavailable as exc:
                if self.outage.since is None:
                    self.say(f"{exc}: waiting for the results DB (up to "
                             f"{self.outage.wait_s:g} s)")
                self.outage.failed(exc)
                self._answering_since = float("inf")
            except Exception:  # noqa: BLE001 - another hiccup: next interval
                continue

    def tick(self) -> list[int]:
        """One renewal + silent-death sweep; returns the attempt ids it ended."""
        window = stale_after_s(self.heartbeat_s)
        asked = time.monotonic()
        self.db.renew_leases(self.ids, self.owner, window)
        now = time.monotonic()
        if self.outage.since is not None:
            self.say(f"the results DB answers again after {now - self.outage.since:.0f} s")
        self.outage.ok()
        if now - asked > self.heartbeat_s:  # waited for the lock: so did every heartbeat
            self._answering_since = now
        self._answering_since = min(self._answering_since, now)
        if now - self._answering_since < window:
            return []  # trials could not heartbeat during the outage: give them a window
        ended = []
        for att in self.db.stale_attempts(self.ids):
            if att.owner != self.owner:
                continue  # another driver's attempt: its own driver (or the reconciler) judges
            msg_fault = self._judge(att)
            if msg_fault is None:
                continue
            msg, fault = msg_fault
            self.db.finish_attempt(att.id, RunStatus.FAILED, error=msg, fault=fault)
            self.say(f"run {att.run_id}: attempt {att.number} {msg}")
            self._alive.forget(att.id)
            ended.append(att.id)
        return ended

    def _judge(self, att: AttemptRow) -> tuple[str, Fault] | None:
        """(error text, fault) for a stale attempt that is dead; None while it is only
        starved (its process still uses CPU) or has had just one look."""
        fault = node_fault(att.host)
        last = att.heartbeat or att.started
        silent = (datetime.now(UTC) - last).total_seconds()
        how = ""
        if fault is Fault.WORKER_DIED:
            live = self._alive.look(att.id, att.host, att.pid, silent)
            if live in (Liveness.BUSY, Liveness.FIRST):
                if live is Liveness.BUSY and att.id not in self._told:
                    self._told.add(att.id)
                    self.say(f"run {att.run_id}: attempt {att.number} sent no heartbeat for "
                             f"{silent:.0f} s but its process is using CPU (a loaded node?): "
                             f"waiting, up to {self._alive.max_silent_s:g} s")
                return None
            how = {Liveness.GONE: " (its process is gone)",
                   Liveness.STOPPED: " (its process is stopped)",
                   Liveness.HUNG: (" (its process is busy but silent past "
                                   f"{self._alive.max_silent_s:g} s)"
                                   if silent > self._alive.max_silent_s
                                   else " (its process used no CPU since the last look: hung)"),
                   }.get(live, "")
        return (f"{'node lost' if fault is Fault.NODE_LOST else 'worker died'}: no heartbeat "
                f"since {last:%H:%M:%S} on {att.host}{how}"), fault
