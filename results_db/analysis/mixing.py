"""Did the runs a table compares come from the same code? (issue 34: no silent mixing.)

Over the latest provenance of each compared run (results_db/write/provenance.py): the runs are
*mixed* when they differ in code version (commit, or the hash of an uncommitted diff), in a
package that decides the numbers (MIX_COLUMNS) or in the accelerator kind. Runs that recorded
no provenance (trained before it was recorded) make the answer unknown for them, which is said
too; a sweep where no run recorded any says nothing (there is nothing to compare). The
leaderboard, table, effects, stability and scaling outputs and the report print ``sentence``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contract.provenance import short_key

if TYPE_CHECKING:
    import polars as pl

# What makes two results "from different code or packages" (the storage libraries and ray do
# not change a trained number; they are recorded and shown, not compared).
MIX_COLUMNS: tuple[str, ...] = ("code_version", "python", "torch", "deepspeed", "accelerator")
_LABELS = {"code_version": "code versions", "python": "Python versions",
           "torch": "torch versions", "deepspeed": "DeepSpeed versions",
           "accelerator": "accelerator kinds"}
_SHOWN = 4  # values named per column; the rest are counted


@dataclass(frozen=True)
class CodeMix:
    n_runs: int  # runs compared
    n_recorded: int  # of which recorded their provenance
    differing: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    # ^ column -> [(value, runs)], most runs first, for each MIX_COLUMN with several values
    resumed_across: int = 0  # runs whose attempts ran on more than one code version
    sentence: str | None = None

    @property
    def mixed(self) -> bool:
        return bool(self.differing or self.resumed_across)


def _shown(col: str, value: str | None) -> str:
    if value is None:
        return "unknown"
    return short_key(value) if col == "code_version" else value


def code_mix(runs: pl.DataFrame, latest: pl.DataFrame) -> CodeMix:
    """``runs``: the compared runs (``run_id``); ``latest``: their newest provenance rows
    (ProvenanceMixin.provenance(latest=True), with ``n_code_versions``)."""
    ids = set(runs["run_id"].to_list())
    rec = latest.filter(latest["run_id"].is_in(list(ids)))
    n_runs, n_rec = len(ids), rec.height
    if n_rec == 0:
        return CodeMix(n_runs, 0)
    differing: dict[str, list[tuple[str, int]]] = {}
    for col in MIX_COLUMNS:
        counts = rec.group_by(col).len().sort(["len", col], descending=[True, False],
                                              nulls_last=True)
        if counts.height > 1:
            differing[col] = [(_shown(col, v), int(n)) for v, n in counts.iter_rows()]
    resumed = int((rec["n_code_versions"] > 1).sum()) if "n_code_versions" in rec.columns else 0
    return CodeMix(n_runs, n_rec, differing, resumed,
                   _sentence(n_runs, n_rec, differing, resumed))


def _values(values: list[tuple[str, int]]) -> str:
    named = "; ".join(f"{v}: {n} run{'s' if n != 1 else ''}" for v, n in values[:_SHOWN])
    rest = len(values) - _SHOWN
    return named + (f"; {rest} more" if rest > 0 else "")


def _sentence(n_runs: int, n_rec: int, differing: dict[str, list[tuple[str, int]]],
              resumed: int) -> str | None:
    parts = []
    if differing:
        kinds = " and ".join(f"{len(v)} {_LABELS[c]} ({_values(v)})" for c, v in
                             differing.items())
        who = f"the {n_rec} runs compared" if n_rec == n_runs else \
            f"the {n_rec} of {n_runs} runs compared that recorded it"
        parts.append(f"Mixed provenance: {who} were trained by {kinds}, so a difference "
                     "between them may come from the code or packages, not the variants")
    if resumed:
        parts.append(f"{resumed} run{'s were' if resumed != 1 else ' was'} resumed on other "
                     "code than it started with")
    if n_rec < n_runs:
        missing = n_runs - n_rec
        parts.append(f"{missing} of {n_runs} runs compared recorded no provenance (trained "
                     "before it was recorded), so whether they ran the same code is unknown")
    if not parts:
        return None
    text = "; ".join(parts)
    if not differing:
        text = "Provenance: " + text
    return text + " (orchestrator report lists each run's)."
