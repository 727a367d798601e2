"""Dimension columns of a run, derived from its config (the JSON of a RunSpec).

Derived once, at registration, so SQL can ``GROUP BY gate_position`` without JSON functions.
Configs may be partial (hand-built in tests, older specs): every field is optional here.

Grouping keys (documented in docs/architecture.md):
- ``group_key``: the config minus ``seed``/``name``/``sweep``/``resources`` -> seed replicates.
- ``lr_group_key``: the same minus ``train.lr`` and ``train.min_lr`` -> runs that differ only
  in their learning rate (the max_stable_lr groups). ``min_lr`` goes too because an LR axis
  that scales it with ``lr`` is still one ladder.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from results_db.vocab import DEFAULT_POSITION, DEFAULT_SWITCH_TARGETS, GATE_DEFAULTS

_POS_ORDER = {f"G{i}": i for i in range(1, 6)}


def _joined(gates: list[dict[str, Any]], key: str) -> str | None:
    """One value when all gates agree, else the per-gate values in position order, '+'-joined.
    An unset field is the RunSpec default (GateSpec, via results_db.vocab.GATE_DEFAULTS)."""
    if not gates:
        return None
    default = GATE_DEFAULTS[f"gate_{key}"]
    values = [str(g.get(key, default)) for g in gates]
    return values[0] if len(set(values)) == 1 else "+".join(values)


def gate_dims(gates: list[dict[str, Any]]) -> dict[str, Any]:
    def position(g: dict[str, Any]) -> str:
        return str(g.get("position", DEFAULT_POSITION))

    gates = sorted(gates, key=lambda g: _POS_ORDER.get(position(g), 9))
    independent = GATE_DEFAULTS["gate_input_dependent"]
    return {
        "gate_position": "+".join(position(g) for g in gates) or None,
        "gate_granularity": _joined(gates, "granularity"),
        "gate_sharing": _joined(gates, "sharing"),
        "gate_combine": _joined(gates, "combine"),
        "gate_activation": _joined(gates, "activation"),
        "gate_input_dependent": (all(bool(g.get("input_dependent", independent))
                                     for g in gates) if gates else None),
        "n_gates": len(gates),
    }


def _key(doc: dict[str, Any]) -> str:
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def group_keys(config: dict[str, Any]) -> tuple[str, str]:
    """(group_key, lr_group_key) -- see the module docstring."""
    doc = copy.deepcopy(config)
    for k in ("seed", "name", "sweep", "resources"):
        doc.pop(k, None)
    group = _key(doc)
    train = doc.get("train")
    if isinstance(train, dict):
        train.pop("lr", None)
        train.pop("min_lr", None)
    return group, _key(doc)


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
