"""The words the analysis writes into its tables and sentences, with no frame library: the
CLI's fast paths (``--help``, ``validate``) and the formatters import them without loading
polars, which every module that computes a table imports at its top."""

from __future__ import annotations

from contract.states import RunStatus

DIVERGED_SEEDS: str = RunStatus.DIVERGED.value  # stability's column: seeds that diverged

# bestlr.py's selection column: how a variant's best LR was picked, or why it was not
LOSO = "leave-one-seed-out"
NO_BEST_LR = "no best LR (one LR)"
ONE_SEED = "no held-out pick (one seed)"
NOT_RUN = "not run at the declared LR"


def lr_text(lr: float | None) -> str:
    """3e-2, 1e-1, 1.5e-3: a learning rate as people write it ('none' for null)."""
    if lr is None:
        return "none"
    mant, exp = f"{lr:.2e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"
