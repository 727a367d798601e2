"""Sweep status as one wide row per sweep (counts by state, total, finished and progress), and
the same counts in words where a results view has nothing (or not everything) to show."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from contract.states import STATUS_GROUPS, RunStatus

# The run states in the contract's order, and the contract's one grouping of them
# (contract.states.STATUS_GROUPS, shared with `orchestrator status` and results_db.read.live):
# finished = done-ok + done-bad; `lost` is *waiting* (it needs a driver: submit/rerun), never
# finished, and `pending` is waiting, never live.
STATES: tuple[str, ...] = tuple(s.value for s in RunStatus)
GROUPS: dict[str, tuple[str, ...]] = {
    name: tuple(s.value for s in RunStatus if s in members)
    for name, members in STATUS_GROUPS.items()}
DONE_STATES: tuple[str, ...] = GROUPS["done-ok"] + GROUPS["done-bad"]
LIVE_STATES: tuple[str, ...] = GROUPS["live"]
WAITING_STATES: tuple[str, ...] = GROUPS["waiting"]
# Pages poll fast while a run of the sweep may move on its own or soon (running or waiting).
ACTIVE_STATES: tuple[str, ...] = LIVE_STATES + WAITING_STATES


def status_table(frame: pl.DataFrame) -> pl.DataFrame:
    """db.sweep_status() (sweep, <states>, total, done) -> sweep, <states>, the contract's
    groups (done-ok, done-bad, live, waiting), total, finished, progress (finished / total,
    0..1)."""
    groups = [pl.sum_horizontal([pl.col(s) for s in members] or [pl.lit(0)]).alias(name)
              for name, members in GROUPS.items()]
    out = frame.select("sweep", *STATES, *groups, "total", finished="done")
    return out.with_columns(progress=pl.when(pl.col("total") > 0)
                            .then(pl.col("finished") / pl.col("total")).otherwise(0.0))


def state_counts(statuses: Sequence[str]) -> str:
    """'2 failed, 1 running': the runs by state, in the contract's state order."""
    n = {s: 0 for s in STATES}
    for s in statuses:
        n[s] = n.get(s, 0) + 1
    return ", ".join(f"{k} {s}" for s, k in n.items() if k)


def nothing_to_rank(runs: pl.DataFrame, states: Sequence[str], metric: str) -> str:
    """Why a results view of the sweep is empty, in words: nothing has finished yet, or the
    runs that finished are not in ``states`` (failed, diverged, ...) or lack ``metric``."""
    if runs.is_empty():
        return "This sweep has no runs."
    counts = state_counts(runs["status"].to_list())
    if runs.filter(pl.col("status").is_in(list(DONE_STATES))).is_empty():
        return f"No finished runs yet: {counts}."
    return (f"No {' or '.join(states)} run of this sweep has {metric} yet (runs: {counts}). "
            "Run detail shows each run's attempts and errors.")


def unranked_variants(runs: pl.DataFrame, ranked: Sequence[str]) -> list[tuple[str, str]]:
    """(variant, '2 failed') for each variant of ``runs`` without a row in ``ranked`` (none
    of its runs finished in the chosen states), in declared order."""
    left = runs.filter(~pl.col("variant").is_in(list(ranked))).sort("id")
    per = left.group_by("variant", maintain_order=True).agg(pl.col("status"))
    return [(v, state_counts(s)) for v, s in per.iter_rows()]
