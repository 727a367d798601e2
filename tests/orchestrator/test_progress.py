"""The submit's line progress (not a terminal): one line per status change, read from the DB."""

from __future__ import annotations

import io

from rich.console import Console

import results_db
from contract.metrics import TRAIN_LOSS
from orchestrator.run.progress import Progress
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
