"""The jobs a sweep hands Tune (orchestrator.run.trial.trial_job.PackedJobs): Tune gives every trial
the whole ``with_parameters`` object, so the jobs inside stay bytes until a trial asks for its own
(a plain dict of N TrialJobs cost each of N trials N unpickles: O(N^2) per sweep)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from contract.config import RunSpec
from orchestrator.run.trial.trial_job import PackedJobs, TrialJob


def test_packed_jobs_unpickle_only_the_job_a_trial_asks_for(tmp_path: Path) -> None:
    spec = RunSpec(name="r", sweep="s", model={"preset": "tiny"}, train={"steps": 2, "warmup": 0})
    jobs = {i: TrialJob.of(i, f"r{i}", spec, tmp_path / str(i), "sqlite:///x.db")
            for i in range(50)}
    trial_side = pickle.loads(pickle.dumps(PackedJobs(jobs)))  # what ray.get gives a trial
    assert all(isinstance(b, bytes) for b in trial_side._packed.values())
    assert len(trial_side) == 50 and list(trial_side) == list(range(50))
    assert trial_side[7] == jobs[7] and trial_side["7"].name == "r7"
    with pytest.raises(KeyError):
        trial_side[50]
