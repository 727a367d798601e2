"""Rerun runs as new attempts, resuming from each run's checkpoint dir (unless fresh).

Also the dashboard's rerun button: ``spawn_rerun(db_url, run_id)`` re-queues the run in the DB
at once (status ``pending``, so the page shows the effect) and starts ``orchestrator rerun``
as a detached background process that survives the Streamlit session.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from orchestrator import scheduler
from contract.errors import UserError

DEFAULT_STORAGE = Path("runs")


def resolve_runs(db: Any, refs: list[str | int]) -> list[Any]:
    """RunRows for ids or names; a clear error names the first unknown one."""
    rows = []
    for ref in refs:
        row = db.run(ref)
        if row is None:
            raise UserError(f"no run with id or name {ref!r} in {db.url}")
        rows.append(row)
    return rows


def run_checkpoint_dir(db: Any, row: Any, storage: Path | None) -> Path:
    """Where the run's earlier attempts checkpointed (recorded as an artifact at start)."""
    if storage is None:
        arts = db.artifacts(row.id)
        if arts.height:
            paths = arts.filter(arts["kind"] == "checkpoint_dir")["path"].to_list()
            if paths:
                return Path(paths[-1])
        storage = DEFAULT_STORAGE
    sweep = row.config.get("sweep", "adhoc")
    return scheduler.checkpoint_dir(storage, sweep, row.name)


def rerun_runs(db_url: str, run_ids: list[int | str], fresh: bool = False,
               address: str | None = None, detach: bool = False, storage: Path | None = None,
               max_concurrent: int | None = None, console: Console | None = None
               ) -> dict[int, str]:
    """New attempt for each run (blocking unless ``detach``); returns {run_id: status}.

    ``fresh`` deletes the run's checkpoints first, so it trains from step 0.
    ``detach`` spawns one background ``orchestrator rerun`` per run and returns at once.
    """
    import results_db

    from orchestrator.trial_job import TrialJob, driver_owner

    db = results_db.open(db_url)
    rows = resolve_runs(db, list(run_ids))
    if detach:
        for r in rows:
            spawn_rerun(db_url, r.id, fresh=fresh)
        return {r.id: "pending" for r in rows}
    db.reconcile()  # a dead driver's silent attempts are lost now, not "running"
    rows = resolve_runs(db, list(run_ids))
    busy = [r.name for r in rows if r.status == "running"]
    if busy:
        raise UserError(f"run(s) {', '.join(busy)} are running; cancel them first "
                        "(orchestrator cancel ...)")
    jobs = []
    for r in rows:
        ckpt = run_checkpoint_dir(db, r, storage)
        if fresh and ckpt.exists():
            shutil.rmtree(ckpt)
        jobs.append(TrialJob.of(r.id, r.name, r.config, ckpt, db_url))  # validated once
    db.set_status([r.id for r in rows], "pending", strict=True)
    root = storage or jobs[0].checkpoint_dir.parent.parent.parent
    progress = None
    if console is not None:
        from orchestrator.progress import Progress

        progress = lambda d, ids: Progress(d, ids, console)  # noqa: E731
    say = print if console is None else (lambda m: console.print(m, highlight=False))
    opts = scheduler.Options(db_url=db_url, storage=root, address=address,
                             experiment=f"rerun-{time.strftime('%Y%m%d-%H%M%S')}",
                             max_concurrent=max_concurrent, progress=progress,
                             owner=driver_owner("rerun"), say=say)
    return scheduler.execute(jobs, opts)


@dataclass(frozen=True)
class SweepRerun:
    """What ``rerun --sweep S`` takes and what it leaves alone, each with the reason."""

    take: list[int]
    left: list[tuple[int, str]]  # (run id, why it is left alone)


DEFAULT_RERUN = ("failed", "lost")


def sweep_rerun_plan(db: Any, sweep: str, statuses: list[str] | None = None) -> SweepRerun:
    """Runs of ``sweep`` to rerun: those in ``statuses`` (default failed, lost) plus pending
    runs nobody will start -- their driver's lease ran out (it died before starting them).
    Reconciles first (writes): a run whose attempt went silent is lost, and taken.
    Everything else is left alone with its reason: live runs (holder and heartbeat age),
    pending runs a live driver still holds, finished results."""
    from contract.states import DONE_OK

    db.reconcile()  # silent attempts (each past its own heartbeat threshold) -> lost first
    wanted = set(statuses or DEFAULT_RERUN)
    take: list[int] = []
    left: list[tuple[int, str]] = []
    for r in db.live_runs(sweep, statuses=None).iter_rows(named=True):
        rid, st, owner = int(r["run_id"]), r["status"], r["owner"] or "a driver"
        lease = r["lease_s_left"]
        held = lease is not None and lease > 0
        if st in wanted or (st == "pending" and not held):
            take.append(rid)
        elif st == "pending":
            left.append((rid, f"pending, queued by {owner} (alive: its lease runs "
                              f"{lease:.0f} s more)"))
        elif st == "running":
            left.append((rid, f"running under {owner}, last heartbeat "
                              f"{r['heartbeat_age_s'] or 0:.0f} s ago"))
        elif st in DONE_OK:
            left.append((rid, f"{st}: a result (rerun it by id to redo it)"))
        else:
            left.append((rid, f"{st}: not in --status {','.join(sorted(wanted))}"))
    return SweepRerun(take=take, left=left)


def spawn_rerun(db_url: str, run_id: int, fresh: bool = False,
                log_dir: str | Path | None = None) -> int:
    """Queue ``run_id`` (status pending, now) and start ``orchestrator rerun`` detached.

    Returns the background process id; its output goes to <log_dir>/rerun-<id>-<time>.log
    (default: ./runs/_logs).
    """
    import results_db

    from orchestrator.env import absolute_db_url

    db_url = absolute_db_url(db_url)
    db = results_db.open(db_url)
    row = resolve_runs(db, [run_id])[0]
    if row.status == "running":
        raise UserError(f"run {row.name} is running; cancel it first")
    db.set_status([row.id], "pending", strict=True)
    logs = Path(log_dir) if log_dir else DEFAULT_STORAGE / "_logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"rerun-{row.id}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    cmd = [sys.executable, "-m", "orchestrator", "rerun", str(row.id), "--db", db_url]
    if fresh:
        cmd.append("--fresh")
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return proc.pid
