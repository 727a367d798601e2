"""The smoke sweep (sweeps/smoke.yaml) registered by the submit path into a results DB, with
run 1 succeeded (a short loss curve, val/ppl 12.5) and run 2 failed (an error and its
traceback); the rest pending. What the CLI tests read and the child-process tests build on."""

from __future__ import annotations

from pathlib import Path

import results_db
from orchestrator.run.driver.submit import make_plan, register

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"


def fill(url: str) -> str:
    """Register and play the smoke sweep into the DB at ``url``; returns ``url``."""
    db = results_db.open(url)
    res = register(db, make_plan(SMOKE), force=False)
    ok, bad = res.to_run[0], res.to_run[1]
    a = db.start_attempt(ok.id, host="h")
    db.log_metrics(ok.id, a.id, [(s, "train/loss", 5.0 - s / 10) for s in (10, 20, 30)])
    db.log_summaries(ok.id, a.id, {"val/ppl": 12.5})
    db.finish_attempt(a.id, "succeeded")
    b = db.start_attempt(bad.id, host="h")
    db.finish_attempt(b.id, "failed", error="RuntimeError: boom",
                      traceback="Traceback (most recent call last):\n  ...\nRuntimeError: boom")
    db.close()  # no connection left open: a caller may change the file directly
    return url
