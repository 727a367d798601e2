"""TrialJob: everything one Tune trial needs, validated once in the driver, frozen.

It crosses processes as one object (Ray pickles it into the trial's config): the trial, the
multi-worker coordinator and every Ray Train rank read the same typed fields -- no dict that
each process re-validates. ``owner`` is the driver's lease id, written on the attempt it claims
("submit 3f2a on host x"), so a driver that loses a claim can say who holds the run.
"""

from __future__ import annotations

import os
import pickle
import secrets
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contract import env
from contract.config import RunSpec
from contract.states import DEFAULT_HEARTBEAT_S
from orchestrator.run.health.faults import RetryPolicy


def driver_owner(kind: str = "submit") -> str:
    """A lease id for this driver process: "submit 3f2a on host x (pid 123)"."""
    return f"{kind} {secrets.token_hex(2)} on host {socket.gethostname()} (pid {os.getpid()})"


def heartbeat_interval() -> float:
    """GATESWEEP_HEARTBEAT_S, default contract.states.DEFAULT_HEARTBEAT_S (5 s)."""
    return env.seconds("GATESWEEP_HEARTBEAT_S")


@dataclass(frozen=True)
class TrialJob:
    """One run to execute as one trial. Build it with :meth:`of` (validates the spec once)."""
    run_id: int
    name: str
    spec: RunSpec
    checkpoint_dir: Path
    db_url: str
    owner: str = ""
    retries: int = 0
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    flush_s: float = 5.0
    db_wait_s: float = 300.0  # how long a DB outage is ridden out (run/health/dbretry.py)
    # GATESWEEP_RETRY_CODE_ERRORS as the driver read it: a trial on another node does not
    # have the driver's environment, so the policy travels with the job (``policy``)
    retry_code_errors: bool = False
    train_storage: str | None = None  # Ray Train's run state (multi-worker), default beside
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.spec, RunSpec):
            raise TypeError(f"TrialJob {self.name}: spec must be a RunSpec, got "
                            f"{type(self.spec).__name__} (use TrialJob.of)")
        if self.retries < 0 or self.heartbeat_s <= 0 or self.flush_s <= 0 or \
                self.db_wait_s < 0:
            raise ValueError(f"TrialJob {self.name}: retries >= 0, heartbeat_s > 0, "
                             f"flush_s > 0 and db_wait_s >= 0 expected, got {self.retries}, "
                             f"{self.heartbeat_s}, {self.flush_s}, {self.db_wait_s}")

    @classmethod
    def of(cls, run_id: int, name: str, spec: RunSpec | dict[str, Any],
           checkpoint_dir: str | Path, db_url: str, **kw: Any) -> TrialJob:
        """Validate a RunSpec (or its JSON) once; the checkpoint dir becomes absolute."""
        rs = spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)
        return cls(run_id=int(run_id), name=name, spec=rs,
                   checkpoint_dir=Path(checkpoint_dir).resolve(), db_url=db_url, **kw)

    @property
    def policy(self) -> RetryPolicy:
        """The sweep's retry policy, as the driver set it (never the trial's environment)."""
        return RetryPolicy(retries=self.retries, retry_code_errors=self.retry_code_errors)

    @property
    def cpus(self) -> float:
        return self.spec.resources.cpus

    @property
    def gpus(self) -> float:
        return self.spec.resources.gpus

    @property
    def workers(self) -> int:
        return self.spec.resources.workers

    @property
    def is_multiworker(self) -> bool:
        return self.workers > 1


class PackedJobs(Mapping[int, TrialJob]):
    """{run_id: TrialJob}, each job pickled on its own, for ``tune.with_parameters``.

    Tune hands a trial *every* parameter object (one ``ray.get`` per trial), so a plain dict
    of N jobs made each of N trials unpickle all N RunSpecs: O(N) per trial, O(N^2) per sweep
    (1,000 runs: 0.67 MB and ~0.35 s per trial on a loaded 2-core machine). Packed, a trial
    copies N small byte strings and unpickles only the job it asks for."""

    def __init__(self, jobs: Mapping[int, TrialJob]) -> None:
        self._packed = {int(k): pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
                        for k, v in jobs.items()}

    def __getitem__(self, run_id: int) -> TrialJob:
        job = pickle.loads(self._packed[int(run_id)])  # noqa: S301 - our own driver's bytes
        if not isinstance(job, TrialJob):
            raise TypeError(f"PackedJobs[{run_id}]: not a TrialJob ({type(job).__name__})")
        return job

    def __iter__(self) -> Iterator[int]:
        return iter(self._packed)

    def __len__(self) -> int:
        return len(self._packed)


# --- a trial's Tune config: the one layout every reader uses ---------------------------------
RUN_KEY = "run"  # config = {"run": {"id": run id, "name": run name, "shape": placement index}}


def trial_config(job: TrialJob, shape: int) -> dict[str, Any]:
    """What Tune's config holds for ``job``'s trial: its run's id and name (Tune's trial name
    and folder) and the index of its placement among the sweep's few distinct ones."""
    return {"id": job.run_id, "name": job.name, "shape": shape}


def run_id_of(config: Mapping[str, Any]) -> int:
    """The run id in a trial's Tune config."""
    return int(config[RUN_KEY]["id"])

