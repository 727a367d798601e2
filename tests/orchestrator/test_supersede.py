"""A superseded or preempted attempt, through the Tune trial's body (``execute_job``) with a
real tiny run on a real SQLite file (docs/cluster.md, "Failures").

- Superseded (a worker stalled, its driver recorded it dead): it stops without side effects --
  no checkpoint past its last *written* step, none of its buffered points -- and since nobody
  holds the run it raises for Tune to retry; the retry resumes with no gap and no duplicate.
- Preempted by SIGTERM: the checkpoint is written after its points, and the error text says
  SIGTERM, not "no longer the run's current one" (that is a takeover).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

import orchestrator.run.trial.reporter
import orchestrator.run.trial.runner
import results_db
from contract.config import RunSpec
from orchestrator.run.trial.runner import RetrySuperseded, execute_job
from orchestrator.run.trial.trial_job import TrialJob
from tests.support.onejob import loss_steps, registered_job
from trainer import checkpoint

TRAIN = dict(steps=24, batch_size=4, seq_len=32, warmup=4, log_every=1, eval_every=0,
             eval_batches=1, checkpoint_every=4)
AT_STEP = 10


def _setup(tmp_path: Path) -> tuple[results_db.ResultsDB, TrialJob]:
    spec = RunSpec(name="r", sweep="sup", model={"preset": "tiny"}, train=TRAIN)
    # points are written only at checkpoints (the trainer's flush): the buffer matters
    return registered_job(tmp_path, spec, flush_s=3600, heartbeat_s=0.1,
                          owner="submit test on host h", db_wait_s=0)


def _at_step(monkeypatch: pytest.MonkeyPatch, act: Callable[[object], None]) -> None:
    """execute_job's DBReporter, doing ``act(reporter)`` once, after logging AT_STEP."""
    base = orchestrator.run.trial.reporter.DBReporter

    class At(base):  # type: ignore[misc, valid-type]
        fired = False

        def log(self, step: int, metrics: Mapping[str, float]) -> None:
            super().log(step, metrics)
            if step == AT_STEP and not At.fired:
                At.fired = True
                act(self)

    monkeypatch.setattr(orchestrator.run.trial.runner, "DBReporter", At)


def test_a_stalled_attempt_stops_without_side_effects_and_the_retry_has_no_gap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db, job = _setup(tmp_path)

    def driver_records_it_dead(rep: object) -> None:
        # what the driver's lease keeper does to a silent (SIGSTOPped) attempt
        att = db.current_attempt(job.run_id)
        db.finish_attempt(att.id, "failed", error="worker died: no heartbeat",
                          fault="worker_died")
        deadline = time.monotonic() + 10
        while not rep.superseded and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.02)  # it wakes up: its heartbeat thread learns first

    _at_step(monkeypatch, driver_records_it_dead)
    with pytest.raises(RetrySuperseded, match="superseded while nobody held the run"):
        execute_job(job)  # raised to Tune: retried as configured
    written = loss_steps(db, job.run_id)
    latest = checkpoint.latest_checkpoint(job.checkpoint_dir)
    # the checkpoint at AT_STEP - 2 flushed everything before it; nothing after was written
    assert written == list(range(1, 9)) and latest is not None and latest[0] == 8, (
        written, latest)
    (att,) = db.attempts(job.run_id)
    assert (att.status, att.fault) == ("failed", "worker_died")  # its first report won
    assert db.run(job.run_id).status == "failed"
    arts = db.artifacts(job.run_id)
    saved = [int(Path(p).name.split("_")[-1]) for k, p in
             zip(arts["kind"].to_list(), arts["path"].to_list()) if k == "checkpoint"]
    # Checkpoint 8 is on disk (the retry resumes from it, below). Its row rides on the
    # attempt's next write (reporter.py): a heartbeat between the save and the stall wrote
    # it; otherwise the next write came after the attempt was superseded and was dropped.
    assert saved in ([4], [4, 8]), saved

    monkeypatch.undo()  # the retry (Tune's, or `orchestrator rerun`)
    res = execute_job(job)
    assert res.status == "succeeded" and res.first_step == 9, res
    counts = db.query(f"SELECT step, COUNT(*) AS n FROM metrics WHERE run_id = {job.run_id} "
                      "AND name = 'train/loss' GROUP BY step ORDER BY step")
    assert counts["step"].to_list() == list(range(1, TRAIN["steps"] + 1))  # no gap
    assert set(counts["n"].to_list()) == {1}  # no duplicate
    assert [(a.status, a.fault) for a in db.attempts(job.run_id)] == [
        ("failed", "worker_died"), ("succeeded", None)]


def test_a_superseded_attempt_whose_run_is_held_elsewhere_reports_the_holder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another driver took the run over (this attempt's lease ran out): the trial trains no
    further, writes nothing, and reports `skipped` with the holder, so its driver waits."""
    db, job = _setup(tmp_path)
    holder: list[int] = []

    def another_driver_takes_over(rep: object) -> None:
        att = db.current_attempt(job.run_id)
        db.finish_attempt(att.id, "lost", error="lease ran out", fault="superseded")
        new = db.claim_run(job.run_id, "submit other on host y", "y", heartbeat_s=3600)
        holder.append(new.id)

    _at_step(monkeypatch, another_driver_takes_over)
    res = execute_job(job)
    assert res.status == "skipped" and "running under submit other on host y" in \
        (res.holder or ""), res
    assert loss_steps(db, job.run_id) == list(range(1, 9))
    latest = checkpoint.latest_checkpoint(job.checkpoint_dir)
    assert latest is not None and latest[0] == 8
    assert db.current_attempt(job.run_id).id == holder[0]
    assert db.heartbeat(holder[0]) is True


def test_sigterm_preemption_checkpoints_after_its_points_and_says_sigterm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db, job = _setup(tmp_path)
    _at_step(monkeypatch, lambda rep: rep.request_stop("SIGTERM"))  # type: ignore[attr-defined]
    from trainer.preempt import Preempted

    with pytest.raises(Preempted):  # preempted is retried: raised to Tune
        execute_job(job)
    (att,) = db.attempts(job.run_id)
    assert (att.status, att.fault) == ("failed", "preempted")
    assert "(SIGTERM)" in att.error and "no longer the run's current one" not in att.error
    assert db.run(job.run_id).status == "lost"
    latest = checkpoint.latest_checkpoint(job.checkpoint_dir)
    assert latest is not None and latest[0] == AT_STEP  # the step boundary it stopped at
    assert loss_steps(db, job.run_id) == list(range(1, AT_STEP + 1))  # flushed first
