"""The one vocabulary of results: dimension columns, gate defaults, finished states, verdicts.

Everything that names "which columns describe a variant", "what an unset gate field means",
"which run states count as results" or "which verdicts exist" imports it from here (exported
as ``results_db.DIMENSIONS``, ``results_db.VERDICTS``...; the finished states with a result
are the contract's ``contract.states.DONE_OK``, re-exported as ``results_db.DONE_OK``).
Gate defaults come from the contract (contract/gate_dims.py reads them off the RunSpec models,
never re-spelled); ``import contract`` imports pydantic only, not torch
(tests/results_db/test_analysis_vocab.py keeps it so).
"""

from __future__ import annotations

from typing import Any

from contract import dimensions, gate_dims
from contract.metrics import BENCH
from contract.states import RunStatus

# Every column that describes a variant (filters, "dimension columns that vary", effects), and
# the gate ones plus the non-linearity-only control (what the paper's gate tables vary): the
# contract's table of run dimensions (contract/dimensions.py), in its order.
DIMENSIONS: tuple[str, ...] = dimensions.COLUMNS
GATE_DIMENSIONS: tuple[str, ...] = dimensions.GATE_COLUMNS

# column -> the value an unset field means (the RunSpec contract's defaults).
GATE_DEFAULTS: dict[str, Any] = gate_dims.COLUMN_DEFAULTS
DEFAULT_POSITION: str = gate_dims.GATE_DEFAULTS["position"]
DEFAULT_NORM_STYLE: str = gate_dims.DEFAULT_NORM_STYLE
DEFAULT_SWITCH_TARGETS: str = gate_dims.DEFAULT_SWITCH_TARGETS

# What statistics are computed over by default: a diverged run's loss is not a sample.
RESULT_STATES: tuple[str, ...] = (RunStatus.SUCCEEDED.value,)

# Verdicts of a row vs the baseline (results_db/analysis/verdict.py). "needs >= k seeds" is
# spelled with the number ("needs >= 4 seeds"): match it with verdict_kind(). "inconclusive"
# is a main effect's (results_db/analysis/effects.py) whose CI holds 0 but is too wide to rule
# out an effect: its spread is variant-to-variant, so more seeds alone need not narrow it.
VERDICTS: tuple[str, ...] = ("baseline", "better", "worse", "within noise",
                             "needs >= k seeds", "inconclusive", "n = 1", "no data")
NEEDS_SEEDS = "needs >= {k} seeds"


def verdict_kind(verdict: str | None) -> str | None:
    """The VERDICTS entry a verdict string belongs to ("needs >= 4 seeds" -> "needs >= k
    seeds"); None for None."""
    if verdict is None:
        return None
    if verdict.startswith("needs >= ") and verdict.endswith(" seeds"):
        return "needs >= k seeds"
    if verdict not in VERDICTS:
        raise ValueError(f"verdict: {verdict!r} is not one of {', '.join(VERDICTS)}")
    return verdict


# Metric direction: quality metrics where higher is better; everything else (losses,
# perplexities, spikes, activations, attention sink) is lower-is-better.
_HIGHER_PREFIXES = (BENCH,)
_HIGHER_PARTS = ("acc", "exact_match", "retrieval", "f1", "tokens_per_s")
_LOWER_PARTS = ("ppl", "perplexity", "loss", "bits_per_byte", "bpb")


def higher_is_better(metric: str) -> bool:
    """True for benchmark scores and accuracies; False for losses, perplexities (also a
    benchmark's word_perplexity) and probes."""
    last = metric.rsplit("/", 1)[-1]
    if any(p in last for p in _LOWER_PARTS):
        return False
    return metric.startswith(_HIGHER_PREFIXES) or any(p in last for p in _HIGHER_PARTS)
