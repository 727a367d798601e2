"""The gate dimension columns of a stored config, and what an unset field means.

``gate_dims(model.gates)`` -> gate_position, gate_granularity, gate_sharing, gate_combine,
gate_activation, gate_input_dependent, n_gates: what the results DB derives at registration
(results_db/schema/dims.py) so SQL can ``GROUP BY gate_position``. Stored gates may omit fields
(hand- built configs, older specs): an unset field means GateSpec's default (``GATE_DEFAULTS``, read
from the models, never re-spelled); ``COLUMN_DEFAULTS`` is the same by column name
(results_db.schema.vocab.GATE_DEFAULTS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contract import gate_positions
from contract.config import GateSpec, ModelConfig, SwitchHeadConfig

GATE_FIELDS = ("granularity", "sharing", "combine", "activation", "input_dependent")
GATE_DEFAULTS: dict[str, Any] = {f: GateSpec.model_fields[f].default
                                 for f in ("position", *GATE_FIELDS)}
# column -> the value an unset field means (gate_position has none: no gate is NULL)
COLUMN_DEFAULTS: dict[str, Any] = {
    **{f"gate_{f}": GATE_DEFAULTS[f] for f in GATE_FIELDS},
    "nonlinearity": ModelConfig.model_fields["nonlinearity"].default,
}
DEFAULT_NORM_STYLE: str = ModelConfig.model_fields["norm_style"].default
DEFAULT_SWITCH_TARGETS: str = SwitchHeadConfig.model_fields["targets"].default


def _joined(gates: Sequence[Mapping[str, Any]], key: str) -> str | None:
    """One value when all gates agree, else the per-gate values in position order, '+'-joined."""
    if not gates:
        return None
    values = [str(g.get(key, GATE_DEFAULTS[key])) for g in gates]
    return values[0] if len(set(values)) == 1 else "+".join(values)


def gate_dims(gates: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The gate dimension columns (gate_position, gate_granularity, ...) of ``model.gates``
    as stored (a list of GateSpec dumps, fields possibly unset)."""
    def position(g: Mapping[str, Any]) -> str:
        return str(g.get("position", GATE_DEFAULTS["position"]))

    gates = sorted(gates, key=lambda g: gate_positions.order(position(g)))
    return {
        "gate_position": "+".join(position(g) for g in gates) or None,
        **{f"gate_{f}": _joined(gates, f) for f in GATE_FIELDS if f != "input_dependent"},
        "gate_input_dependent": (all(bool(g.get("input_dependent",
                                                GATE_DEFAULTS["input_dependent"]))
                                     for g in gates) if gates else None),
        "n_gates": len(gates),
    }
