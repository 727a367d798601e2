"""submit for a sweep with a ``decide:`` block: seeds go where a row's verdict is still open.

Round by round: every seed group (each variant at each point of the sweep's axes, the baseline's
included) first gets ``first_seeds`` seeds; then results_db reads every variant row anytime-
validly (results_db/analysis/sequential.py) and each undecided row below ``max_seeds`` gets its
next seed, fewest expected seeds-to-decision first, with the baseline's run at the same seed
that the pairing needs. A decided row gets nothing more. Seeds are given in order 0, 1, 2, ...
and a seed's value never decides whether it counts, so no seed is dropped or repeated because
of what it showed; a diverged run is an outcome of its seed. The budget (runs, wall hours,
GPU-hours) is checked before each round and caps the round's runs.

Everything the allocation knows is in the DB (which seeds each row has), so a driver killed
mid-round and a new ``submit`` continue the same allocation: the killed round's runs are
pending or lost and run first, and no seed is registered twice (the fingerprint includes the
seed). Two drivers on one sweep still train each run once (the claim rule).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import results_db
from contract.errors import UserError
from contract.identity import group_keys
from orchestrator.run.cluster import check_reachable, resolve_address
from orchestrator.run.driver import rule_lock, scheduler
from orchestrator.run.driver.paths import checkpoint_dir, storage_root
from orchestrator.run.driver.progress import Progress
from orchestrator.run.driver.submit import jobs_for, register, summarise
from orchestrator.sweep.decide import DecideSpec, progress_line

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Console

    from orchestrator.sweep.expand import ExpandedRun
    from orchestrator.sweep.plan import Plan
    from results_db import ResultsDB
    from results_db.analysis.sequential import Spent


@dataclass(frozen=True)
class Seeds:
    """The plan's runs by (seed group, seed), and the seed groups in plan order."""

    runs: dict[tuple[str, int], ExpandedRun]
    groups: list[str]

    @classmethod
    def of(cls, plan: Plan) -> Seeds:
        runs: dict[tuple[str, int], ExpandedRun] = {}
        groups: list[str] = []
        for r in plan.runs:
            key = group_keys(r.spec.model_dump(mode="json"))[0]
            runs[(key, r.seed)] = r
            if key not in groups:
                groups.append(key)
        return cls(runs, groups)

    def next_seed(self, group: str, have: set[int]) -> int | None:
        """The smallest seed of ``group`` not yet registered (seeds go in order)."""
        free = sorted(s for (g, s) in self.runs if g == group and s not in have)
        return free[0] if free else None


def budget_left(decide: DecideSpec, used: Spent) -> int | None:
    """Runs the budget still allows (None: no run bound); 0 once any bound is reached."""
    b = decide.budget
    if (b.hours is not None and used.wall_hours >= b.hours) or \
            (b.gpu_hours is not None and used.gpu_hours >= b.gpu_hours):
        return 0
    return None if b.runs is None else max(b.runs - used.runs, 0)


def _registered(db: ResultsDB, sweep: str) -> dict[str, set[int]]:
    """Seed group -> the seeds registered for it (any state)."""
    frame = db.runs(sweep=sweep, with_config=False, columns=["group_key", "seed"])
    out: dict[str, set[int]] = {}
    for key, seed in frame.select("group_key", "seed").iter_rows():
        out.setdefault(str(key), set()).add(int(seed))
    return out


def next_round(db: ResultsDB, plan: Plan, seeds: Seeds, decide: DecideSpec,
               allowed: int | None) -> list[ExpandedRun]:
    """The runs of the next round (module docstring), at most ``allowed`` of them, in whole
    pairs: a row's seed comes with its baseline's, and a budget cut never takes one without
    the other. A row seed whose baseline seed is missing (a cut by an older gatesweep) gets
    it first."""
    have = _registered(db, plan.spec.name)
    units: list[list[tuple[str, int]]] = []
    for s in range(decide.first_seeds):  # first seeds of every group, seed by seed
        units += [[(group, s)] for group in seeds.groups
                  if s not in have.get(group, set()) and (group, s) in seeds.runs]
    if not units:
        rows = db.decide_rows(plan.spec.name, decide.rule())
        for row in _open_rows(rows):
            group, base = str(row["group_key"]), str(row["base_key"])
            taken, based = have.get(group, set()), have.get(base, set())
            units += [[(base, s)] for s in sorted(taken - based) if (base, s) in seeds.runs]
            if len(taken) >= decide.max_seeds:
                continue
            seed = seeds.next_seed(group, taken)
            if seed is None:
                continue
            units.append([(group, seed)] + ([(base, seed)] if seed not in based else []))
    picked: list[tuple[str, int]] = []
    for unit in units:
        fresh = [k for k in unit if k in seeds.runs and k not in picked]
        if allowed is not None and len(picked) + len(fresh) > allowed:
            break
        picked += fresh
    return [seeds.runs[k] for k in picked]


def _check_metric(db: ResultsDB, sweep: str, decide: DecideSpec) -> None:
    """An unknown decide.metric can never decide: once runs have finished without it, stop
    with one line naming the key and what the runs do record."""
    names = db.summary_names(sweep)
    if names and decide.metric not in names:
        raise UserError(f"decide.metric: no finished run of {sweep} has {decide.metric!r}; "
                        f"expected one of: {', '.join(sorted(names)[:20])}")


def _open_rows(rows: pl.DataFrame) -> list[dict[str, object]]:
    """Undecided rows, fewest expected seeds-to-decision first (unknown last)."""
    import polars as pl

    if rows.height == 0:
        return []
    open_ = rows.filter(pl.col("verdict") == "undecided")
    return open_.sort("more_seeds", nulls_last=True, maintain_order=True).to_dicts()


def run_adaptive(db_url: str, plan: Plan, *, storage: Path, address: str | None,
                 max_concurrent: int | None, stale_after: float | None,
                 console: Console, change_rule: bool = False) -> int:
    """Rounds until every row decided, reached max_seeds, or the budget ended; returns the
    exit code (0 when every run it ran succeeded or diverged)."""
    decide = plan.spec.decide
    assert decide is not None  # submit only comes here for a decide: sweep
    say: Callable[[str], None] = lambda m: console.print(m, highlight=False)  # noqa: E731
    storage = storage_root(storage)  # every run's folder inside it, before the DB changes
    for r in plan.runs:
        checkpoint_dir(storage, plan.spec.name, r.name)
    check_reachable(resolve_address(address))  # before anything is registered
    db = results_db.open(db_url)
    changed = rule_lock.check_rule(db, plan, change_rule)  # refused: nothing written
    rule_lock.record(db, plan, changed)
    db.reconcile()
    if stale_after is not None:
        db.reconcile(stale_after_s=stale_after)
    seeds = Seeds.of(plan)
    opts = scheduler.Options(
        db_url=db_url, storage=storage, experiment=scheduler.experiment_name(plan.spec.name),
        retries=plan.spec.retries, max_concurrent=max_concurrent or plan.spec.max_concurrent,
        address=address, progress=lambda d, ids: Progress(d, ids, console), say=say)
    final: dict[int, str] = {}
    tried: set[int] = set()
    # a killed driver's round first: its pending/lost/failed runs (register re-queues them)
    have = _registered(db, plan.spec.name)
    earlier = [r for (g, s), r in seeds.runs.items() if s in have.get(g, set())]
    first = register(db, plan, force=False, runs=earlier)
    if first.running:
        # Held: by a live driver, or by a killed one whose heartbeats are not stale yet (CI
        # saw a resubmit seconds after the kill leave two such runs `running` and exit 0).
        # Wait as `submit` does (the stale ones become lost), then queue the lost ones again.
        scheduler.wait_for_holders(db, [r.id for r in first.running], say)
        first = register(db, plan, force=False, runs=earlier)
    batch = first.to_run
    while True:
        if batch:
            tried.update(r.id for r in batch)
            final.update(scheduler.execute(jobs_for(batch, plan, storage, db_url), opts))
            db.record_decide_look(plan.spec.name, decide.rule())  # the order pairs are read in
        used = db.decide_spent(plan.spec.name)
        allowed = budget_left(decide, used)
        say(progress_line(db, plan.spec.name, decide, used))
        if allowed == 0:
            say("decide: the budget is spent; open rows stay undecided")
            break
        _check_metric(db, plan.spec.name, decide)
        runs = next_round(db, plan, seeds, decide, allowed)
        if not runs:
            break
        res = register(db, plan, force=False, runs=runs)
        batch = [r for r in res.to_run if r.id not in tried]  # a run fails once per driver
        if not batch:
            break
    say(db.decide_sentence(plan.spec.name, decide.rule()))
    return summarise(db, final, console) if final else 0
