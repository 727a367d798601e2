"""The ``gate.<field>`` shorthand of sweep files: its one owner.

A row's ``gate.*`` keys (a variant's, an axis's) form ONE GateSpec that becomes ``model.gates``,
merged over the single gate the base may give; ``gate.position: none`` (or null/false) means no
gate. The key check (keys.py), the expansion (expand.py: apply, resolve, read back for
include/exclude rules, axis labels) and the variant/axis conflict rule (spec.py) all ask here,
so the prefix, the no-gate spellings and the merge rule are spelled once.
"""

from __future__ import annotations

from typing import Any

from contract.config import GateSpec

PREFIX = "gate"
NO_GATE = ("none", "null", None, False)  # gate.position values that mean "no gate"
NO_GATE_LABEL = "nogate"  # in run names (axis labels)
_FIELDS = tuple(GateSpec.model_fields)
_DEFAULT_POSITION = GateSpec.model_fields["position"].default


def field_of(key: str) -> str | None:
    """'gate.position' -> 'position'; None for any key that is not the shorthand."""
    head, _, rest = key.partition(".")
    return rest if head == PREFIX and rest else None


def is_shorthand(key: str) -> bool:
    return key.partition(".")[0] == PREFIX


def check(key: str) -> str | None:
    """None if ``key`` is a valid shorthand key, else what was expected."""
    if field_of(key) not in _FIELDS:
        return (f"unknown gate shorthand {key!r}; expected gate.<field> with field one of: "
                + ", ".join(_FIELDS))
    return None


def spec_path(key: str) -> list[str | int] | None:
    """The RunSpec path a shorthand key writes (any gate of model.gates), or None."""
    f = field_of(key)
    return None if f is None else ["model", "gates", "*", f]


def conflict(a: str, b: str) -> bool | None:
    """Two shorthand keys write the same field only when they are the same key (gate.position
    x gate.granularity cross legitimately); None when not both are shorthand."""
    return a == b if is_shorthand(a) and is_shorthand(b) else None


def label(key: str, value: Any) -> str | None:
    """The axis label of a no-gate value (else None: labelled like any value)."""
    return NO_GATE_LABEL if field_of(key) == "position" and value in NO_GATE else None


def resolve(model: dict[str, Any], fields: dict[str, Any]) -> str | None:
    """Write the row's shorthand ``fields`` into ``model['gates']``; a problem, or None."""
    if fields.get("position", _DEFAULT_POSITION) in NO_GATE:
        model["gates"] = []
        return None
    existing = model.get("gates") or []
    if len(existing) > 1:
        return "the gate.* shorthand needs at most one gate in model.gates"
    base_gate = existing[0] if existing and isinstance(existing[0], dict) else {}
    model["gates"] = [{**base_gate, **fields}]
    return None


def read(view: dict[str, Any], key: str) -> Any:
    """A shorthand key's value in a RunSpec dump: the single gate's field, 'none' for the
    position of an ungated run, None when there are several gates."""
    gates = (view.get("model") or {}).get("gates") or []
    f = field_of(key)
    if not gates:
        return "none" if f == "position" else None
    return gates[0].get(f) if len(gates) == 1 else None


def means_no_gate(got: Any, want: Any) -> bool:
    """An include/exclude rule's ``gate.position: none`` (or null/false) matches an ungated
    run, whose position reads 'none'."""
    return want in NO_GATE and got == "none"
