"""submit: expand -> dedupe against the DB -> schedule -> summarise.

Nothing is written before the whole file validated; re-submitting a sweep schedules only
what has not succeeded/diverged yet (``--force`` redoes everything).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

import results_db
from contract.states import DONE_OK
from orchestrator.run.cluster import check_reachable, resolve_address
from orchestrator.run.driver import rule_lock, scheduler
from orchestrator.run.driver.code_cache import requeue_other_code
from orchestrator.run.driver.paths import checkpoint_dir, storage_root
from orchestrator.run.driver.progress import Progress
from orchestrator.run.trial.trial_job import TrialJob
from orchestrator.sweep.plan import Plan, make_plan, not_in_file_note  # noqa: F401 - re-exported
from orchestrator.sweep.table import param_counts

if TYPE_CHECKING:
    from collections.abc import Sequence

    from orchestrator.sweep.expand import ExpandedRun
    from results_db import RegisterResult, ResultsDB, RunRow


def register(db: ResultsDB, plan: Plan, force: bool,
             runs: Sequence[ExpandedRun] | None = None) -> RegisterResult:
    """Sweep row + one run row per expanded run (``runs``: only these of the plan's, as an
    adaptive sweep allocates them); returns results_db.RegisterResult."""
    runs = plan.runs if runs is None else runs
    counts = param_counts(runs)
    new = []
    for r in runs:
        c = counts.get(r.name)
        new.append(results_db.NewRun(
            name=r.name, fingerprint=r.fingerprint, variant=r.variant, seed=r.seed,
            config=r.spec.model_dump(mode="json"),
            params_total=c[0] if c else None, params_gates=c[1] if c else None))
    sweep_id = db.ensure_sweep(plan.spec.name, plan.path.read_text(encoding="utf-8"),
                               plan.spec.description)
    return db.register_runs(sweep_id, new, force=force)


def jobs_for(rows: list[RunRow], plan: Plan, storage: Path, db_url: str) -> list[TrialJob]:
    """One TrialJob per registered row (the RunSpec was validated by expand: no re-parse)."""
    by_fp = {r.fingerprint: r for r in plan.runs}
    return [TrialJob(run_id=row.id, name=by_fp[row.fingerprint].name,
                     spec=by_fp[row.fingerprint].spec, db_url=db_url,
                     checkpoint_dir=checkpoint_dir(storage, plan.spec.name,
                                                   by_fp[row.fingerprint].name))
            for row in rows]


def run_submit(db_url: str, plan: Plan, *, force: bool, storage: Path, address: str | None,
               max_concurrent: int | None, stale_after: float | None, console: Console,
               change_rule: bool = False) -> int:
    """Returns the process exit code: 0 when every run of the sweep succeeded or diverged.

    A crashed earlier submit's runs are resumed: its silent attempts become lost (after
    ``stale_after`` seconds, or each attempt's own heartbeat-derived threshold when None),
    and pending/lost/failed runs are registered to run again. Runs another live driver holds
    are left to it and waited for, so the summary and exit code cover the whole sweep."""

    storage = storage_root(storage)  # every run's folder inside it, before the DB changes
    for r in plan.runs:
        checkpoint_dir(storage, plan.spec.name, r.name)
    check_reachable(resolve_address(address))  # seconds, not Ray's 90 s, and before the DB
    db = results_db.open(db_url)
    rule_lock.record(db, plan, rule_lock.check_rule(db, plan, change_rule))  # (a decide: removed)
    # A killed earlier submit's attempts become lost: after each one's own threshold (a few
    # of its heartbeat intervals), or sooner with an explicit --stale-after.
    db.reconcile()
    if stale_after is not None:
        db.reconcile(stale_after_s=stale_after)
    res = register(db, plan, force)
    res = requeue_other_code(db, plan, res, storage,
                             lambda m: console.print(m, highlight=False))  # cached_by
    note = not_in_file_note(plan, db.runs(sweep=plan.spec.name, with_config=False,
                                          columns=["fingerprint", "variant"]))
    if note:
        console.print(note, highlight=False)
    msg = f"{plan.spec.name}: {len(plan.runs)} runs, {len(res.cached)} cached, " \
          f"{len(res.to_run)} to run"
    if res.running:
        msg += f", {len(res.running)} already running elsewhere (left alone)"
    console.print(msg, highlight=False)
    for row in res.running:
        console.print(f"  {db.claim_refusal(row.id)}", highlight=False)
    if not res.to_run and not res.running:
        return 0
    say = lambda m: console.print(m, highlight=False)  # noqa: E731
    opts = scheduler.Options(
        db_url=db_url, storage=storage, experiment=scheduler.experiment_name(plan.spec.name),
        retries=plan.spec.retries, max_concurrent=max_concurrent or plan.spec.max_concurrent,
        address=address, progress=lambda d, ids: Progress(d, ids, console), say=say)
    final = scheduler.execute(jobs_for(res.to_run, plan, storage, db_url), opts)
    scheduler.wait_for_holders(db, [r.id for r in res.running], say)
    final.update({r.id: now.status for r in res.running if (now := db.run(r.id)) is not None})
    return summarise(db, final, console)


def summarise(db: ResultsDB, final: dict[int, str], console: Console) -> int:
    """Print the outcome; exit code 1 if any run did not succeed/diverge."""
    counts: dict[str, int] = {}
    for status in final.values():
        counts[status] = counts.get(status, 0) + 1
    console.print("done: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
                  highlight=False)
    bad = [i for i, s in final.items() if s not in DONE_OK]
    for i in bad:
        row = db.run(i)
        if row is None:  # deleted since (by hand): nothing left to say about it
            continue
        attempts = db.attempts(i)
        last = attempts[-1] if attempts else None
        err = last.error if last else None
        why = f" [{last.fault}]" if last is not None and last.fault and (
            f"[{last.fault};" not in (err or "")) else ""
        console.print(f"  {row.name} (id {i}): {row.status}{why}" + (f" - {err}" if err else "")
                      + f"  [see: orchestrator show {i}]", highlight=False)
    return 1 if bad else 0
