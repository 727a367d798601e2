"""The dotted-key scheme of sweep files, checked against the RunSpec schema.

A delta (a variant row, an axis, an include/exclude rule) addresses RunSpec fields with dotted
keys: ``train.lr``, ``model.n_kv_head``, ``model.gates.0.granularity`` (an integer indexes a
list), ``eval.ppl_sets.wiki.path`` (a dict key). Nested mappings are the same thing written
out (``{model: {n_kv_head: 8}}``). ``gate.<field>`` is the single-gate shorthand
(orchestrator/sweep/gate_shorthand.py owns it). Keys are checked here, before expansion, so a typo
is reported with the fields that exist under its parent.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from pydantic import BaseModel

from contract.config import RunSpec
from contract.ids import ascii_int
from orchestrator.sweep import gate_shorthand

# Set by the expansion itself, never by a delta.
_RESERVED = {"name": "the run name is generated", "sweep": "the sweep is the file's 'name'",
             "seed": "use the top-level 'seeds' list (or axes.seed)"}


def split(key: str) -> list[str | int]:
    """'model.gates.0.position' -> ['model', 'gates', 0, 'position']."""
    parts: list[str | int] = []
    for p in key.split("."):
        index = ascii_int(p)  # the one rule: '²' is a key, not a broken index
        parts.append(p if index is None else index)
    return parts


def _unwrap(tp: Any) -> Any:
    """Optional[X] -> X; Annotated stripped."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _unwrap(args[0]) if len(args) == 1 else tp
    return tp


def _child(tp: Any, part: str | int) -> tuple[bool, Any, str]:
    """Step into ``tp`` by ``part``: (ok, child type, what was expected)."""
    tp = _unwrap(tp)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        fields: dict[str, Any] = dict(tp.model_fields)
        if tp.__name__ == "ModelConfig":
            fields["preset"] = None  # resolved by ModelConfig's before-validator
        if isinstance(part, str) and part in fields:
            f = fields[part]
            return True, (f.annotation if f is not None else str), ""
        return False, None, "one of: " + ", ".join(sorted(fields))
    if origin is tuple or origin is list:
        if isinstance(part, int):
            return True, typing.get_args(tp)[0], ""
        return False, None, "a list index (0, 1, ...)"
    if origin is dict:
        return True, typing.get_args(tp)[1], ""
    return False, None, "nothing below this key (it is a value, not a mapping)"


def check_key(key: str, allow_reserved: bool = False) -> str | None:
    """None if ``key`` addresses a RunSpec field (or the gate shorthand), else a message."""
    parts = split(key)
    if any(p == "" for p in parts):
        return f"malformed dotted key {key!r} (empty component)"
    head = parts[0]
    if gate_shorthand.is_shorthand(key):
        return gate_shorthand.check(key)
    if head in _RESERVED and not allow_reserved:
        return f"{head!r} cannot be set here: {_RESERVED[head]}"
    tp: Any = RunSpec
    for i, part in enumerate(parts):
        ok, tp, expected = _child(tp, part)
        if not ok:
            where = ".".join(str(p) for p in parts[:i]) or "the top level"
            return f"unknown key {str(part)!r} under {where}; expected {expected}"
    return None


def flatten(delta: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> dotted keys. Lists and scalars are leaves; an empty dict stays a
    leaf only at the top (``baseline: {}`` is the empty delta)."""
    out: dict[str, Any] = {}
    for k, v in delta.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out

