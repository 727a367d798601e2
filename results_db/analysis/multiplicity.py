"""THE multiplicity rule of a sweep's verdicts: how many rows are judged at once and at what
level each row's interval is read.

A sweep compares R variant rows with one baseline. Read each at 95 %, and a sweep in which
nothing works still calls about 0.05 x R rows better or worse (0.75 of 15 rows). The correction
says which error is controlled:

- ``none`` (the fixed-seed default, contract.analysis_defaults.CORRECTION): each row's CI at
  1 - alpha (95 %); the error rate is per row, not over the sweep;
- ``bonferroni``: each row's CI at 1 - alpha / R; the probability that any row's verdict
  better/worse is false is <= alpha, whatever the dependence between rows (they share the
  baseline's seeds, so they are dependent);
- ``holm``: Holm's step-down over the rows' two-sided p-values (the same t statistic and df as
  their CI): it controls the same family-wise error and calls at least the rows Bonferroni
  calls. Holm has no interval of its own, so the CIs shown (and "within noise", which reads the
  interval) are Bonferroni's.

The family R is the rows that are tested: non-baseline rows with a CI (paired or Welch; a row
with one seed has no test, a row without a baseline value none either). compare.py reads the
leaderboard's intervals at ``row_level``; sequential.py (adaptive sweeps) uses ``holm`` on its
anytime-valid p-values. ``rule_text`` says the rule in words wherever a verdict is printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contract.analysis_defaults import CORRECTION, FAMILY_ERROR

if TYPE_CHECKING:
    import numpy as np

NONE, BONFERRONI, HOLM = "none", "bonferroni", "holm"
CORRECTIONS: tuple[str, ...] = (NONE, BONFERRONI, HOLM)
assert CORRECTION in CORRECTIONS


def check(correction: str, family_error: float) -> None:
    """One clear error for a correction or an error rate no rule has."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction: expected one of {', '.join(CORRECTIONS)}, "
                         f"got {correction!r}")
    if not 0 < family_error <= 0.5:
        raise ValueError(f"family_error: an error rate in (0, 0.5] (0.05 = 5 %), "
                         f"got {family_error}")


def row_level(correction: str, family_error: float, family: int) -> float:
    """The confidence level of each row's interval: 1 - alpha without a correction, else
    1 - alpha / R (Bonferroni's, also shown under Holm)."""
    check(correction, family_error)
    if correction == NONE:
        return 1.0 - family_error
    return 1.0 - family_error / max(family, 1)


def holm(p: np.ndarray, alpha: float) -> np.ndarray:
    """Holm's step-down: which hypotheses (p-values ``p``; NaN = untested, never rejected) are
    rejected at family-wise level ``alpha``."""
    import numpy as np

    p = np.asarray(p, dtype=float)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    reject = np.zeros(len(p), dtype=bool)
    for i, j in enumerate(order):
        if p[j] > alpha / (len(order) - i):
            break
        reject[j] = True
    return reject


def _pct(x: float) -> str:
    return f"{100 * x:.4g} %"


ROWS = "rows with a CI"


def rule_text(correction: str, family_error: float, family: int, what: str = ROWS) -> str:
    """The rule behind a table's verdicts, in words: "95 % CI per row, no correction over the
    14 rows with a CI"; "Bonferroni over the 14 rows with a CI: each CI at 99.64 %, family-wise
    error <= 5 %"; "Holm over the 14 rows with a CI, family-wise error <= 5 %; CIs at
    Bonferroni's 99.64 %". ``what``: the family's members in the plural ("contrasts")."""
    level = row_level(correction, family_error, family)
    rows = "the 1 row with a CI" if family == 1 and what == ROWS else f"the {family} {what}"
    if correction == NONE:
        return f"{_pct(level)} CI per row, no correction over {rows}"
    if correction == BONFERRONI:
        return (f"Bonferroni over {rows}: each CI at {_pct(level)}, family-wise error "
                f"<= {_pct(family_error)}")
    return (f"Holm over {rows}, family-wise error <= {_pct(family_error)}; CIs at "
            f"Bonferroni's {_pct(level)}")


__all__ = ["BONFERRONI", "CORRECTIONS", "FAMILY_ERROR", "HOLM", "NONE", "check", "holm",
           "row_level", "rule_text"]
