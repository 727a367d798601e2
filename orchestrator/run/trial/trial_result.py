"""What one trial (or one Ray Train worker) hands back: a frozen record, not a string-keyed dict.

Tune and Ray Train carry results as dicts of metrics, so ``report()`` is the one place that
turns it into one (None fields left out) and ``from_report`` the one place that reads it back
(the driver's skipped-run check). The keys are the field names, so a Tune experiment's
``result.json`` reads as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from contract.states import RunStatus as S

# succeeded / diverged: trained to the end (divergence is a result); failed: recorded with a
# fault; cancelled: by the user; skipped: another attempt holds the run (``holder`` says whose);
# superseded: the DB took the run from this attempt, which stopped without writing. A worker
# group's final result is its run's state as the DB has it, so lost/pending/running too.
TrialStatus = Literal[S.SUCCEEDED, S.DIVERGED, S.FAILED, S.CANCELLED, "skipped", "superseded",
                      S.LOST, S.PENDING, S.RUNNING]
STATUSES: tuple[str, ...] = tuple(str(s) for s in TrialStatus.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TrialResult:
    status: TrialStatus
    steps: int = -1  # optimizer steps trained (-1: unknown, the attempt did not finish)
    first_step: int = -1  # the first step this attempt trained (-1: none; > 0 after a resume)
    fault: str | None = None  # contract.states.FaultClass value of a failed attempt
    error: str | None = None  # one line: the exception and what the retry policy decided
    holder: str | None = None  # skipped: who holds the run ("run 7 is running under ...")
    pid: int | None = None  # the trial process (reused actors share one)
    attempts: int | None = None  # a worker group's run: attempts recorded for it so far

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"TrialResult.status: {self.status!r} is not one of {STATUSES}")

    def report(self) -> dict[str, Any]:
        """The metrics dict Tune / Ray Train get (fields that are None are left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_report(cls, metrics: Mapping[str, Any] | None) -> TrialResult | None:
        """Read a reported dict back; None when it is not one (Tune's own keys are ignored,
        a trial that died before reporting has no status)."""
        if not metrics or metrics.get("status") not in STATUSES:
            return None
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in metrics.items() if k in names})
