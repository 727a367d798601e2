"""Rerun runs as new attempts, resuming from each run's checkpoint dir (unless fresh).

Also the dashboard's rerun button: ``spawn_rerun(db_url, run_id)`` validates and re-queues the
run in the DB at once (status ``pending``, so the page shows the effect) and starts
``orchestrator rerun`` as a detached background process that survives the Streamlit session.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

import results_db
from contract.child import child_env, python_command
from contract.config import RunSpec
from contract.errors import UserError
from contract.ids import parse_id
from contract.states import DONE_OK, RunStatus
from orchestrator.run.cluster import check_reachable, resolve_address
from orchestrator.run.driver import scheduler
from orchestrator.run.driver.paths import DEFAULT_STORAGE, checkpoint_dir, remove_dir, storage_root
from orchestrator.run.driver.progress import Progress
from orchestrator.run.env import absolute_db_url
from orchestrator.run.trial.trial_job import TrialJob, driver_owner

if TYPE_CHECKING:
    from results_db import ResultsDB, RunRow



def resolve_runs(db: ResultsDB, refs: list[str | int], sweep: str | None = None
                 ) -> list[RunRow]:
    """RunRows for ids or names; a clear error names the first unknown one, a name that
    several runs share (which one was meant is a guess: give the id), typed digits that are
    one run's id and another run's name (contract/ids.py reads them as the id; which was
    meant is a guess too), and with ``sweep`` a run of another sweep (``cancel 7 --sweep S``
    must not cancel run 7 of sweep T)."""
    rows = []
    in_sweep = None if sweep is None else set(
        db.runs(sweep=sweep, with_config=False, columns=["id"])["id"].to_list())
    for ref in refs:
        row = db.run(ref)
        if row is None:
            raise UserError(f"no run with id or name {ref!r} in {db.url}")
        # found by id when the reference reads as this run's id (the one id rule: '0002' is
        # id 2 -- comparing the text with str(row.id) took it for a name and skipped the check)
        if parse_id(ref) != row.id:  # found by name: is the name unique?
            same = db.runs(with_config=False, columns=["id"], name=row.name)
            if same.height > 1:
                ids = ", ".join(f"{i} ({s})" for i, s in same.select("id", "sweep").rows())
                raise UserError(f"run name {row.name!r} is not unique: runs {ids}; give the "
                                "run id")
        elif isinstance(ref, str):  # typed digits, read as an id: is it a run's name too?
            named = [(i, s) for i, s in db.runs(with_config=False, columns=["id"], name=ref)
                     .select("id", "sweep").rows() if i != row.id]
            if named:
                other = ", ".join(f"{i} ({s})" for i, s in named)
                raise UserError(f"run reference {ref!r} is ambiguous: it is the id of run "
                                f"{row.name!r} and the name of run(s) {other}; refer to the "
                                f"one you mean by its other reference ({row.name!r}, or the "
                                "id)")
        if in_sweep is not None and row.id not in in_sweep:
            raise UserError(f"run {ref!r} (id {row.id}) is not in sweep {sweep!r}")
        rows.append(row)
    return rows


def recorded_checkpoint_dir(db: ResultsDB, run_id: int, sweep: str, name: str) -> Path | None:
    """Where the run's attempts checkpointed (the ``checkpoint_dir`` artifact each attempt
    records), or None before its first start. The DB is not trusted with a path: anyone who
    can write a shared results DB could name any directory, and the rerun's trainer writes and
    prunes there. Accepted only as ``<storage>/<sweep>/<name>/checkpoints`` of this very run
    (resolved, no symlink or ``..`` detour); anything else is one line (UserError)."""
    paths = db.artifact_paths(run_id, "checkpoint_dir")
    if not paths or not paths[-1]:
        return None
    return _fits_layout(Path(paths[-1]), sweep, name, f"run {name} (id {run_id})")


def _fits_layout(recorded: Path, sweep: str, name: str, who: str) -> Path:
    root = recorded.parent.parent.parent
    if not recorded.is_absolute() or recorded != checkpoint_dir(root, sweep, name):
        raise UserError(f"{who}: its recorded checkpoint dir {str(recorded)!r} is not "
                        f"<storage>/{sweep}/{name}/checkpoints; refusing to use it (pass "
                        "--storage DIR to choose where the run checkpoints)")
    return recorded


def sweep_storage(db: ResultsDB, sweep: str) -> Path | None:
    """The storage root the sweep's runs checkpoint under, from the newest run that recorded
    one (a run that never started has no artifact of its own: it belongs beside its siblings,
    not under whatever directory ``rerun`` is started from)."""
    started = db.runs(sweep=sweep, with_config=False, columns=["id", "name", "status"])
    for rid, name, status in reversed(started.select("id", "name", "status").rows()):
        if status == RunStatus.PENDING:
            continue
        try:
            found = recorded_checkpoint_dir(db, int(rid), sweep, name)
        except UserError:
            continue  # a sibling's odd record says nothing about this run
        if found is not None:
            return found.parent.parent.parent
    return None


@dataclass(frozen=True)
class Placement:
    """Where one rerun checkpoints, and the storage root that must contain it."""
    checkpoint_dir: Path
    storage: Path


def sweep_of(db: ResultsDB, row: RunRow) -> str:
    """The name of the sweep the run's DB row belongs to (its identity, with ``row.name``)."""
    return str(db.sweeps().filter(id=row.sweep_id)["name"].item())


def place(db: ResultsDB, row: RunRow, storage: Path | None) -> Placement:
    """The run's checkpoint dir: ``<--storage>/<sweep>/<name>/checkpoints`` when --storage is
    given; else the dir its attempts recorded (checked by recorded_checkpoint_dir); else
    beside its sweep's other runs; else under ./runs. Sweep and name are the DB row's own
    (a stored config can name another run: rerun --fresh then deleted that run's
    checkpoints); orchestrator/run/driver/paths.py keeps the path inside the storage root."""
    sweep = sweep_of(db, row)
    if storage is not None:
        root = storage_root(storage)
    else:
        rec = recorded_checkpoint_dir(db, row.id, sweep, row.name)
        if rec is not None:
            return Placement(rec, rec.parent.parent.parent)
        root = storage_root(sweep_storage(db, sweep) or DEFAULT_STORAGE)
    return Placement(checkpoint_dir(root, sweep, row.name), root)


def remove_checkpoints(p: Placement, storage: Path | None, say: Callable[[str], object]
                       ) -> None:
    """``--fresh``: delete the run's checkpoint dir, only inside --storage (default ./runs),
    saying what is removed (paths.remove_dir). A recorded dir elsewhere is left alone (one
    line, exit 2)."""
    try:
        remove_dir(p.checkpoint_dir, storage_root(storage),
                   lambda m: say(f"rerun --fresh: {m}"))
    except UserError as exc:
        raise UserError(f"rerun --fresh: {exc} (pass --storage {p.storage} to remove it "
                        "there)") from None


def rerun_runs(db_url: str, run_ids: list[int | str], fresh: bool = False,
               address: str | None = None, detach: bool = False, storage: Path | None = None,
               max_concurrent: int | None = None, console: Console | None = None
               ) -> dict[int, str]:
    """New attempt for each run (blocking unless ``detach``); returns {run_id: status}.

    ``fresh`` deletes the run's checkpoints first (inside ``storage``), so it trains from
    step 0. ``detach`` starts one background ``orchestrator rerun`` per run (with this
    command's --address and storage) and returns at once. Either way every run is validated
    first (queue_runs): a refused run stays as it was.
    """

    db = results_db.open(db_url)
    say = print if console is None else (lambda m: console.print(m, highlight=False))
    rows, jobs, places = queue_runs(db, list(run_ids), db_url, fresh, address, storage, say)
    if detach:
        for r, p in zip(rows, places):
            start_child(db_url, r.id, p.storage, address, fresh)
        return {r.id: RunStatus.PENDING.value for r in rows}
    progress = None
    if console is not None:
        progress = lambda d, ids: Progress(d, ids, console)  # noqa: E731
    opts = scheduler.Options(db_url=db_url, storage=places[0].storage, address=address,
                             experiment=f"rerun-{time.strftime('%Y%m%d-%H%M%S')}",
                             max_concurrent=max_concurrent, progress=progress,
                             owner=driver_owner("rerun"), say=say)
    return scheduler.execute(jobs, opts)


def queue_runs(db: ResultsDB, refs: list[int | str], db_url: str, fresh: bool,
               address: str | None, storage: Path | None, say: Callable[[str], object]
               ) -> tuple[list[RunRow], list[TrialJob], list[Placement]]:
    """Validate every run (not running, its stored config as a RunSpec, its checkpoint dir,
    the cluster answers), and only then delete checkpoints (``fresh``) and set the runs
    pending: anything refused is one line and nothing on disk or in the DB changed."""
    rows = resolve_runs(db, refs)
    db.reconcile()  # a dead driver's silent attempts are lost now, not "running"
    rows = resolve_runs(db, [r.id for r in rows])
    busy = [r.name for r in rows if r.status == RunStatus.RUNNING]
    if busy:
        raise UserError(f"run(s) {', '.join(busy)} are running; cancel them first "
                        "(orchestrator cancel ...)")
    jobs, places = [], []
    for r in rows:
        spec = stored_spec(r, sweep_of(db, r))
        p = place(db, r, storage)
        places.append(p)
        jobs.append(TrialJob.of(r.id, r.name, spec, p.checkpoint_dir, db_url))
    check_reachable(resolve_address(address))  # before anything is deleted or re-queued
    if fresh:
        for p in places:
            remove_checkpoints(p, storage, say)
    db.set_status([r.id for r in rows], RunStatus.PENDING, strict=True)
    return rows, jobs, places


def stored_spec(row: RunRow, sweep: str | None = None) -> RunSpec:
    """The run's stored config as a RunSpec; a config that no longer validates is one line
    naming the run and the first problem (not pydantic's 19-line report). With ``sweep`` (the
    row's own), a config that names another run or sweep is refused too: the trial would
    train as that run."""
    from pydantic import ValidationError


    try:
        # a config stored before a field existed reads as what it trained (model.init legacy)
        spec = RunSpec.from_stored(row.config)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"])) or "config"
        raise UserError(f"run {row.name} (id {row.id}): its stored config is not a valid run "
                        f"spec ({exc.error_count()} problem(s); first: {where}: "
                        f"{first['msg']})") from None
    if sweep is not None and (spec.sweep, spec.name) != (sweep, row.name):
        raise UserError(f"run {row.name} (id {row.id}) of sweep {sweep!r}: its stored config "
                        f"names run {spec.name!r} of sweep {spec.sweep!r}; refusing to train "
                        "it as another run (register it again with its own config)")
    return spec


@dataclass(frozen=True)
class SweepRerun:
    """What ``rerun --sweep S`` takes and what it leaves alone, each with the reason."""
    take: list[int]
    left: list[tuple[int, str]]  # (run id, why it is left alone)


DEFAULT_RERUN = (RunStatus.FAILED.value, RunStatus.LOST.value)


def sweep_rerun_plan(db: ResultsDB, sweep: str, statuses: list[str] | None = None) -> SweepRerun:
    """Runs of ``sweep`` to rerun: those in ``statuses`` (default failed, lost) plus pending
    runs nobody will start -- their driver's lease ran out (it died before starting them).
    Reconciles first (writes): a run whose attempt went silent is lost, and taken.
    Everything else is left alone with its reason: live runs (holder and heartbeat age),
    pending runs a live driver still holds, finished results."""

    db.reconcile()  # silent attempts (each past its own heartbeat threshold) -> lost first
    wanted = set(statuses or DEFAULT_RERUN)
    take: list[int] = []
    left: list[tuple[int, str]] = []
    for r in db.live_runs(sweep, statuses=None).iter_rows(named=True):
        rid, st, owner = int(r["run_id"]), r["status"], r["owner"] or "a driver"
        lease = r["lease_s_left"]
        held = lease is not None and lease > 0
        if st in wanted or (st == RunStatus.PENDING and not held):
            take.append(rid)
        elif st == RunStatus.PENDING:
            left.append((rid, f"pending, queued by {owner} (alive: its lease runs "
                              f"{lease:.0f} s more)"))
        elif st == RunStatus.RUNNING:
            left.append((rid, f"running under {owner}, last heartbeat "
                              f"{r['heartbeat_age_s'] or 0:.0f} s ago"))
        elif st in DONE_OK:
            left.append((rid, f"{st}: a result (rerun it by id to redo it)"))
        else:
            left.append((rid, f"{st}: not in --status {','.join(sorted(wanted))}"))
    return SweepRerun(take=take, left=left)


def spawn_rerun(db_url: str, run_id: int, fresh: bool = False,
                log_dir: str | Path | None = None, storage: Path | None = None,
                address: str | None = None) -> int:
    """The dashboard's button: validate and queue ``run_id`` (queue_runs: status pending, so
    the page shows the effect), then start ``orchestrator rerun`` detached. Returns the
    background process id; its output goes to <log_dir>/rerun-<id>-<time>.log (default:
    ./runs/_logs)."""
    db_url = absolute_db_url(db_url)
    rows, _, places = queue_runs(results_db.open(db_url), [run_id], db_url, fresh, address,
                                 storage, print)
    return start_child(db_url, rows[0].id, places[0].storage, address, fresh, log_dir)


def start_child(db_url: str, run_id: int, storage: Path, address: str | None, fresh: bool,
                log_dir: str | Path | None = None) -> int:
    """``orchestrator rerun ID`` in its own session, with the DB, storage, address and
    --fresh this command was given; the child checks again before it trains.
    contract/child.py: no code from the working directory."""
    db_url = absolute_db_url(db_url)
    logs = Path(log_dir) if log_dir else DEFAULT_STORAGE / "_logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"rerun-{run_id}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    args = ["rerun", str(run_id), "--db", db_url, "--storage", str(storage.resolve())]
    if address := resolve_address(address):
        args += ["--address", address]
    if fresh:  # deleted already; anything written since goes too
        args.append("--fresh")
    with open(log, "ab") as out:
        proc = subprocess.Popen(python_command("orchestrator", *args), env=child_env(),
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return proc.pid
