"""The submit's line progress (not a terminal): one line per status change, read from the DB."""

from __future__ import annotations

import io

from rich.console import Console

import results_db
from contract.metrics import TRAIN_LOSS
from orchestrator.run.driver.progress import Progress
from tests.support.synthdb import register


def test_a_tick_prints_each_status_change_once_with_its_step_and_loss(sqlite_url: str) -> None:
    db = results_db.open(sqlite_url)
    regs = register(db, {"name": "p", "base": {"model": {"preset": "tiny"}},
                         "variants": {"baseline": {}}, "seeds": [0, 1, 2]})
    ids = [r.id for r in regs]
    out = io.StringIO()
    prog = Progress(db, ids, Console(file=out, width=200, force_terminal=False))

    prog._tick()
    assert out.getvalue() == ""  # queued runs are not news

    a0 = db.start_attempt(ids[0], host="h")
    prog._tick()
    assert [ln.split("] ", 1)[1] for ln in out.getvalue().splitlines()] == [
        f"{regs[0].row.name}: running"]

    db.log_metrics(ids[0], a0.id, [(1, TRAIN_LOSS, 5.5), (2, TRAIN_LOSS, 4.25)])
    db.finish_attempt(a0.id, "succeeded")
    a1 = db.start_attempt(ids[1], host="h")
    db.finish_attempt(a1.id, "failed", error="boom")
    prog._tick()
    prog._tick()  # nothing changed since: no line
    lines = [ln.split("] ", 1)[1] for ln in out.getvalue().splitlines()]
    r0, r1 = regs[0].row.name, regs[1].row.name
    assert lines == [f"{r0}: running", f"{r0}: succeeded step 2 loss 4.25",
                     f"{r1}: failed"], lines
    assert db.run_statuses(ids) == {ids[0]: "succeeded", ids[1]: "failed", ids[2]: "pending"}
    assert db.run_statuses([]) == {}


def test_the_status_poll_reads_only_runs_that_can_still_change(sqlite_url: str) -> None:
    """The server leaves out the queue's pending runs (unless one was seen otherwise) and a
    settled run leaves the poll: a 1,000-run sweep's tick no longer reads 1,000 rows."""
    db = results_db.open(sqlite_url)
    regs = register(db, {"name": "q", "base": {"model": {"preset": "tiny"}},
                         "variants": {"baseline": {}}, "seeds": [0, 1, 2, 3]})
    ids = [r.id for r in regs]
    a0 = db.start_attempt(ids[0], host="h")
    a1 = db.start_attempt(ids[1], host="h")
    assert db.run_statuses(ids, except_status="pending") == {ids[0]: "running",
                                                             ids[1]: "running"}
    db.finish_attempt(a1.id, "failed", error="boom")
    assert db.set_status([ids[1]], "pending") == [ids[1]]  # re-queued (rerun)
    assert db.run_statuses(ids, except_status="pending") == {ids[0]: "running"}
    assert db.run_statuses(ids, except_status="pending", keep=[ids[1]]) == {
        ids[0]: "running", ids[1]: "pending"}

    out = io.StringIO()
    prog = Progress(db, ids, Console(file=out, width=200, force_terminal=False))
    db.finish_attempt(a0.id, "succeeded")
    a2 = db.start_attempt(ids[2], host="h")
    prog._tick()
    db.finish_attempt(a2.id, "failed", error="boom")
    prog._tick()
    assert db.set_status([ids[2]], "pending") == [ids[2]]  # seen failed, re-queued: news
    assert db.set_status([ids[0]], "pending") == [ids[0]]  # settled: no longer polled
    prog._tick()
    names = {r.id: r.row.name for r in regs}
    lines = [ln.split("] ", 1)[1] for ln in out.getvalue().splitlines()]
    assert lines == [f"{names[ids[0]]}: succeeded", f"{names[ids[2]]}: running",
                     f"{names[ids[2]]}: failed", f"{names[ids[2]]}: pending"], lines
