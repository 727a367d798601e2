"""Dimension columns of a run, derived from its config (the JSON of a RunSpec).

Derived once, at registration, so SQL can ``GROUP BY gate_position`` without JSON functions.
Configs may be partial (hand-built in tests, older specs): every field is optional here.

The grouping keys (``group_key``: seed replicates; ``lr_group_key``: one learning-rate ladder)
and the gate columns are the contract's (contract/identity.py: derived from the same canonical
document as the fingerprint; contract/gate_dims.py), so results_db never re-spells them.
"""

from __future__ import annotations

from typing import Any

from contract.gate_dims import DEFAULT_SWITCH_TARGETS, gate_dims
from contract.identity import group_keys

__all__ = ["derive_dims", "gate_dims", "group_keys"]


def derive_dims(config: dict[str, Any]) -> dict[str, Any]:
    model = config.get("model") or {}
    train = config.get("train") or {}
    moe = model.get("moe") or None
    switch = model.get("switch_head") or None
    group, lr_group = group_keys(config)
    return {
        **gate_dims(list(model.get("gates") or [])),
        "nonlinearity": model.get("nonlinearity"),
        "lr": train.get("lr"),
        "n_layer": model.get("n_layer"),
        "d_model": model.get("d_model"),
        "n_head": model.get("n_head"),
        "n_kv_head": model.get("n_kv_head"),
        "moe_experts": moe.get("n_experts") if isinstance(moe, dict) else None,
        "norm_style": model.get("norm_style"),
        "switch_head": (switch.get("targets", DEFAULT_SWITCH_TARGETS)
                        if isinstance(switch, dict) else None),
        "qk_norm": model.get("qk_norm"),
        "clip_residual": model.get("clip_residual"),
        "steps": train.get("steps"),
        "group_key": group,
        "lr_group_key": lr_group,
    }
