"""Did the runs a table compares come from the same code? (No silent mixing.)

Over the latest provenance of each compared run (results_db/write/provenance.py): the runs are
*mixed* when they differ in code version (commit, or the hash of an uncommitted diff), in a
package that decides the numbers (MIX_COLUMNS) or in the accelerator kind. Runs that recorded
no provenance (trained before it was recorded) make the answer unknown for them, which is said
too; a sweep where no run recorded any says nothing (there is nothing to compare).

Over the compared runs' configs: they are mixed when they were initialised by different
schemes (``model.init``, contract/config.py: paired or legacy; a stored config without the
field is legacy, contract/identity.py ADDED). Two schemes pair seeds differently, so a
comparison across them neither has the variance the other promises nor, at one seed, the same
initial weights: the sentence names it, whether or not provenance was recorded. The
leaderboard, table, effects, stability and scaling outputs and the report print ``sentence``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from contract.identity import ADDED
from contract.provenance import short_key

# What makes two results "from different code or packages" (the storage libraries and ray do
# not change a trained number; they are recorded and shown, not compared).
MIX_COLUMNS: tuple[str, ...] = ("code_version", "python", "torch", "deepspeed", "accelerator")
INIT = "init"  # model.init: a column of the compared runs (from their configs, not provenance)
_LABELS = {"code_version": "code versions", "python": "Python versions",
           "torch": "torch versions", "deepspeed": "DeepSpeed versions",
           "accelerator": "accelerator kinds", INIT: "initialisation schemes (model.init)"}
_SHOWN = 4  # values named per column; the rest are counted


@dataclass(frozen=True)
class CodeMix:
    n_runs: int  # runs compared
    n_recorded: int  # of which recorded their provenance
    differing: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    # ^ column -> [(value, runs)], most runs first, for each MIX_COLUMN with several values
    # (over the runs that recorded provenance) and INIT (over every compared run's config)
    resumed_across: int = 0  # runs whose attempts ran on more than one code version
    sentence: str | None = None

    @property
    def mixed(self) -> bool:
        return bool(self.differing or self.resumed_across)


def _shown(col: str, value: str | None) -> str:
    if value is None:
        return "unknown"
    return short_key(value) if col == "code_version" else value


def _init_counts(runs: pl.DataFrame) -> list[tuple[str, int]]:
    """[(scheme, runs)] over ``runs``' INIT column (null: stored before model.init existed,
    so the pre-field scheme), most runs first; [] without the column."""
    if INIT not in runs.columns:
        return []
    before = ADDED["model"][INIT]
    counts = runs.select(pl.col(INIT).fill_null(before)).to_series().value_counts()
    return sorted(((str(v), int(n)) for v, n in counts.iter_rows()),
                  key=lambda kv: (-kv[1], kv[0]))


def code_mix(runs: pl.DataFrame, latest: pl.DataFrame) -> CodeMix:
    """``runs``: the compared runs (``run_id``, and INIT: their stored ``model.init``, null
    where the config has none); ``latest``: their newest provenance rows
    (ProvenanceMixin.provenance(latest=True), with ``n_code_versions``)."""
    ids = set(runs["run_id"].to_list())
    rec = latest.filter(latest["run_id"].is_in(list(ids)))
    n_runs, n_rec = len(ids), rec.height
    schemes = _init_counts(runs)
    inits = {INIT: schemes} if len(schemes) > 1 else {}
    if n_rec == 0:
        return CodeMix(n_runs, 0, inits, 0, _init_sentence(n_runs, schemes) if inits else None)
    differing: dict[str, list[tuple[str, int]]] = {}
    for col in MIX_COLUMNS:
        counts = rec.group_by(col).len().sort(["len", col], descending=[True, False],
                                              nulls_last=True)
        if counts.height > 1:
            differing[col] = [(_shown(col, v), int(n)) for v, n in counts.iter_rows()]
    resumed = int((rec["n_code_versions"] > 1).sum()) if "n_code_versions" in rec.columns else 0
    said = _sentence(n_runs, n_rec, differing, resumed)
    if inits:
        said = " ".join(s for s in (_init_sentence(n_runs, schemes), said) if s)
    return CodeMix(n_runs, n_rec, {**inits, **differing}, resumed, said)


def _init_sentence(n_runs: int, schemes: list[tuple[str, int]]) -> str:
    return (f"Mixed initialisation: the {n_runs} runs compared were initialised by "
            f"{len(schemes)} {_LABELS[INIT]} ({_values(schemes)}; a run stored without "
            "model.init is legacy), so their seeds do not start from the same weights and a "
            "difference between them may come from the initialisation, not the variants.")


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
