"""Dimension columns of a run, derived from its config (the JSON of a RunSpec).

Derived once, at registration, so SQL can ``GROUP BY gate_position`` without JSON functions.
Configs may be partial (hand-built in tests, older specs): every field is optional here.

The grouping keys (``group_key``: seed replicates; ``lr_group_key``: one learning-rate ladder)
and the gate columns are the contract's (contract/identity.py: derived from the same canonical
document as the fingerprint; contract/gate_dims.py), so results_db never re-spells them.
"""

from __future__ import annotations

from typing import Any

from contract.dimensions import GATES, TABLE
from contract.gate_dims import gate_dims
from contract.identity import group_keys

__all__ = ["derive_dims", "gate_dims", "group_keys"]


def derive_dims(config: dict[str, Any]) -> dict[str, Any]:
    """Every dimension column of contract/dimensions.py (the gate ones from ``model.gates``),
    n_gates and the two grouping keys."""
    model = config.get("model") or {}
    group, lr_group = group_keys(config)
    return {
        **gate_dims(list(model.get("gates") or [])),
        **{d.column: d.value(config) for d in TABLE if d.path != GATES},
        "group_key": group,
        "lr_group_key": lr_group,
    }
