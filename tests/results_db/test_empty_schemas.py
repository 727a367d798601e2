"""One rule for empty results: every frame a read returns has its schema (column names and
dtypes) whether or not it has rows. Each public read of results_db/read is called on a sweep
with runs and results (the reference), an empty sweep (no runs) and a just-started one (runs
registered, one running, nothing logged yet), and must give the reference's schema.
(``db.query`` and ``db.view`` run SQL text, whose columns the DB does not type: not covered.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import results_db
from orchestrator.run.driver.submit import make_plan, register
from results_db.read.frames import first_runs, group_info, runs_wide, sweep_attempts
from results_db.read.grouping import group_stats

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"

Read = Callable[[Any, str, list[int]], pl.DataFrame]
READS: dict[str, Read] = {
    "runs": lambda db, s, ids: db.runs(sweep=s),
    "runs(columns)": lambda db, s, ids: db.runs(sweep=s, with_config=False,
                                                columns=["id", "name", "lr", "seed"]),
    "sweep_status": lambda db, s, ids: db.sweep_status(s),
    "summaries": lambda db, s, ids: db.summaries(sweep=s),
    "metrics": lambda db, s, ids: db.metrics(run_ids=ids),
    "metrics(max_points)": lambda db, s, ids: db.metrics(run_ids=ids, max_points=8),
    "curves": lambda db, s, ids: db.curves(ids, ["train/loss"], max_points=8),
    "artifacts": lambda db, s, ids: db.artifacts(ids[0] if ids else -1),
    "live_runs": lambda db, s, ids: db.live_runs(s, statuses=None),
    "runs_wide": lambda db, s, ids: runs_wide(db.reader, s, ["val/ppl"]),
    "group_info": lambda db, s, ids: group_info(db.reader, s),
    "first_runs": lambda db, s, ids: first_runs(db.reader, s),
    "sweep_attempts": lambda db, s, ids: sweep_attempts(db.reader, s),
    "group_stats": lambda db, s, ids: group_stats(runs_wide(db.reader, s, ["val/ppl"]),
                                                  "variant", "val/ppl"),
}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> results_db.ResultsDB:
    """Sweep ``smoke``: runs finished with curves and summaries. ``fresh``: the same runs,
    one of them running, nothing logged. ``nothing``: a sweep row and no run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('empty') / 'r.db'}"
    db = results_db.open(url)
    res = register(db, make_plan(SMOKE), force=False)
    for run in res.to_run:
        a = db.start_attempt(run.id, host="h")
        db.log_metrics(run.id, a.id, [(s, "train/loss", 5.0 - s / 10) for s in range(1, 40)])
        db.log_summaries(run.id, a.id, {"val/ppl": 12.5 + run.id})
        db.add_artifact(run.id, a.id, "checkpoint_dir", "/x")
        db.finish_attempt(a.id, "succeeded")
    fresh = tmp_path_factory.mktemp("f") / "fresh.yaml"
    fresh.write_text(SMOKE.read_text(encoding="utf-8").replace("name: smoke", "name: fresh"),
                     encoding="utf-8")
    started = register(db, make_plan(fresh), force=False).to_run
    db.start_attempt(started[0].id, host="h")
    db.ensure_sweep("nothing")
    return db


def _ids(db: results_db.ResultsDB, sweep: str) -> list[int]:
    return [int(i) for i in db.runs(sweep=sweep, with_config=False, columns=["id"])["id"]]


@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("sweep", ["fresh", "nothing"])
def test_every_read_has_its_schema_with_or_without_rows(
        db: results_db.ResultsDB, read: str, sweep: str) -> None:
    full = READS[read](db, "smoke", _ids(db, "smoke"))
    assert full.height > 0 and pl.Null not in full.schema.dtypes(), full.schema
    got = READS[read](db, sweep, _ids(db, sweep))
    assert got.schema == full.schema, (read, sweep)
