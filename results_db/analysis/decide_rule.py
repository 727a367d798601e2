"""What a ``decide:`` block asks of the analysis, with no frame library: the sweep spec
(orchestrator/sweep/decide.py) builds it while validating a file, which must not load polars;
sequential.py reads the rows under it."""

from __future__ import annotations

from dataclasses import dataclass

from results_db.analysis import confseq, multiplicity

RULES = (multiplicity.BONFERRONI, multiplicity.HOLM)  # multiplicity.py owns both
METHOD = multiplicity.BONFERRONI  # THE rule of a decide sweep (sequential.py's docstring)
TESTS = ("mixture_t", "sign")  # confseq.py (Gaussian differences), signcs.py (any continuous)


@dataclass(frozen=True)
class DecideRule:
    """What a ``decide:`` block asks of the analysis (orchestrator/sweep/decide.py parses it)."""

    metric: str
    margin: float  # "within noise" half-width, in the metric's units or relative
    relative: bool  # margin (and the differences) relative to the baseline's per-seed value
    error_rate: float  # family-wise, over the sweep's rows
    max_seeds: int  # a row that reaches it undecided is inconclusive
    higher_is_better: bool
    g: float = confseq.MIXTURE_G
    test: str = "mixture_t"  # TESTS: which confidence sequence reads the differences
