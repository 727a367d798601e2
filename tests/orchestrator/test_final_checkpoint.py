"""The final checkpoint's points ride on the attempt's end (contract/reporter.py,
``points_ride_on_end``): a trial writes in two transactions, claim and end, and an attempt
that dies between its final save and its end leaves no hole, because the next attempt does
not resume from a final checkpoint the DB has no row of (runner.drop_unrecorded_final).

A real tiny run through ``trainer.train`` and the trial's body (``execute_job``) on a real
SQLite file. The death is the process's: the first attempt trains to the end with the
trial's reporter and is never closed, as if killed right after its final save.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import orchestrator.run.trial.runner
import results_db
from contract.config import RunSpec
from orchestrator.run.trial.reporter import DBReporter
from orchestrator.run.trial.runner import execute_job
from orchestrator.run.trial.trial_job import TrialJob
from tests.support.onejob import loss_steps, registered_job
from trainer import checkpoint
from trainer.train import train

STEPS, EVERY = 12, 4
TRAIN = dict(steps=STEPS, batch_size=2, seq_len=16, warmup=0, log_every=1, eval_every=0,
             eval_batches=1, checkpoint_every=EVERY)
OWNER = "submit test on host h"


def _setup(tmp_path: Path, **train: int) -> tuple[results_db.ResultsDB, TrialJob]:
    spec = RunSpec(name="r", sweep="fin", model={"preset": "tiny"}, train={**TRAIN, **train})
    # points are written only at checkpoints and at the end: the buffer is what matters
    return registered_job(tmp_path, spec, flush_s=3600, heartbeat_s=60, owner=OWNER,
                          db_wait_s=0)


def _killed_after_the_final_save(db: results_db.ResultsDB, job: TrialJob) -> None:
    """One attempt that trains to the end, saves its final checkpoint and dies before its
    end is written (its reporter is never closed; its heartbeat thread dies with it)."""
    att = db.claim_run(job.run_id, OWNER, "h")
    assert att is not None
    rep = DBReporter(db, job.run_id, att.id, flush_s=job.flush_s, heartbeat_s=job.heartbeat_s,
                     points_ride_on_end=True)
    res = train(job.spec, rep, job.checkpoint_dir)
    rep._stop.set()  # the process is gone
    assert res.status == "succeeded"
    # the hole the next attempt must fill: the points after the last checkpoint before the
    # final one rode on the end that never came, and the final checkpoint has no row
    assert loss_steps(db, job.run_id) == list(range(1, STEPS - EVERY + 1))
    assert [s for s, _ in checkpoint.complete_checkpoints(job.checkpoint_dir)] == \
        [STEPS - EVERY, STEPS]


def test_a_death_after_the_final_save_is_resumed_with_no_gap(tmp_path: Path) -> None:
    db, job = _setup(tmp_path)
    _killed_after_the_final_save(db, job)

    result = execute_job(job)  # the same driver's retry: it takes the dead attempt over

    assert result.status == "succeeded"
    assert result.first_step == STEPS - EVERY + 1  # resumed from step 8, not from the final 12
    assert loss_steps(db, job.run_id) == list(range(1, STEPS + 1))  # every step, once
    first, second = db.attempts(job.run_id)
    assert (first.status, first.fault) == ("failed", "worker_died")
    assert second.status == "succeeded"
    resumed = db.summaries(run_ids=[job.run_id], names=["train/resumed_from_step"])
    assert resumed["value"].to_list() == [STEPS - EVERY]
    # the new final checkpoint is recorded with the end
    arts = db.artifacts(job.run_id)
    ckpts = [p for k, p in zip(arts["kind"], arts["path"], strict=True) if k == "checkpoint"]
    assert str(job.checkpoint_dir / checkpoint.tag_for(STEPS)) in ckpts
    assert db.run(job.run_id).status == "succeeded"


def test_without_the_guard_the_resume_skips_the_last_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the guard prevents: resumed from the unrecorded final checkpoint, the attempt
    trains nothing, and the steps whose points rode on the lost end stay missing."""
    db, job = _setup(tmp_path)
    _killed_after_the_final_save(db, job)
    monkeypatch.setattr(orchestrator.run.trial.runner, "drop_unrecorded_final", lambda db, job:
    None)

    assert execute_job(job).status == "succeeded"
    assert loss_steps(db, job.run_id) == list(range(1, STEPS - EVERY + 1))


def test_a_recorded_final_checkpoint_is_kept(tmp_path: Path) -> None:
    db, job = _setup(tmp_path)
    assert execute_job(job).status == "succeeded"
    final = job.checkpoint_dir / checkpoint.tag_for(STEPS)
    orchestrator.run.trial.runner.drop_unrecorded_final(db, job)
    assert checkpoint.latest_checkpoint(job.checkpoint_dir) == (STEPS, final)


def test_a_short_trial_writes_in_two_transactions(tmp_path: Path) -> None:
    """Claim, then the end with every point, the summary and the final checkpoint's row."""
    from tests.support.sqlcounter import SQLCounter

    db, job = _setup(tmp_path, steps=2, checkpoint_every=0)
    counter = SQLCounter()
    try:
        assert execute_job(job).status == "succeeded"
    finally:
        counter.close()
    assert counter.tx == 2
    assert loss_steps(db, job.run_id) == [1, 2]
    arts = db.artifacts(job.run_id)
    assert str(job.checkpoint_dir / checkpoint.tag_for(2)) in arts["path"].to_list()
