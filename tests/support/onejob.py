"""One registered run as the TrialJob a Tune trial gets: for tests that drive the trial's
body (``orchestrator.run.trial.runner.execute_job``) or the trainer with the DB reporter directly,
on a real SQLite file, without Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import results_db
from contract.config import RunSpec
from contract.metrics import TRAIN_LOSS
from orchestrator.run.trial.trial_job import TrialJob


def registered_job(tmp_path: Path, spec: RunSpec, **job: Any
                   ) -> tuple[results_db.ResultsDB, TrialJob]:
    """``spec`` registered as the only run of its sweep in ``tmp_path/results.db``, and its
    TrialJob (checkpoints in ``tmp_path/ckpt``; ``job``: TrialJob's own fields)."""
    url = f"sqlite:///{tmp_path / 'results.db'}"
    db = results_db.open(url)
    sid = db.ensure_sweep(spec.sweep)
    run = db.register_runs(sid, [results_db.NewRun(
        name=spec.name, fingerprint=spec.fingerprint(), variant="baseline", seed=spec.seed,
        config=spec.model_dump(mode="json"))]).to_run[0]
    return db, TrialJob.of(run.id, spec.name, spec, tmp_path / "ckpt", url, **job)


def loss_steps(db: results_db.ResultsDB, run_id: int) -> list[int]:
    """The steps the DB has a train/loss point of, sorted (a duplicate would show twice)."""
    m = db.metrics(run_ids=[run_id], names=[TRAIN_LOSS])
    return sorted(int(s) for s in m["step"].to_list())
