"""Flatten two RunSpec JSON documents and list the keys whose values differ."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

IGNORED = ("name", "seed")  # always differ between runs; not what a reader looks for


def flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    """{"model": {"gates": [{"position": "G1"}]}} -> {"model.gates.0.position": "G1"}."""
    if isinstance(doc, Mapping):
        out: dict[str, Any] = {}
        for key, val in doc.items():
            out.update(flatten(val, f"{prefix}{key}."))
        return out if out or not prefix else {prefix[:-1]: {}}
    if isinstance(doc, (list, tuple)):
        if not doc:
            return {prefix[:-1]: []}
        out = {}
        for i, val in enumerate(doc):
            out.update(flatten(val, f"{prefix}{i}."))
        return out
    return {prefix[:-1]: doc}


def _show(v: Any) -> str:
    return "–" if v is _MISSING else json.dumps(v)


_MISSING = object()


def _covered(key: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """An empty list/dict on one side whose elements the other side lists key by key
    ('model.gates: []' vs 'model.gates.0.position'): the child keys already show it."""
    return any(k.startswith(key + ".") for k in (*a, *b))


def config_diff(this: Mapping[str, Any], base: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """[(dotted key, this value, baseline value)] for every differing leaf, sorted by key."""
    a, b = flatten(this), flatten(base)
    keys = sorted(k for k in set(a) | set(b) if k not in IGNORED and not _covered(k, a, b))
    return [(k, _show(a.get(k, _MISSING)), _show(b.get(k, _MISSING)))
            for k in keys if a.get(k, _MISSING) != b.get(k, _MISSING)]


def runs_diff(configs: Mapping[str, Mapping[str, Any]],
              ignored: tuple[str, ...] = ("name",)) -> list[tuple[str, list[str]]]:
    """[(dotted key, [each run's value])] for every leaf whose value is not the same in all
    ``configs`` ({run label: RunSpec JSON}, any number of runs), sorted by key; a run that
    lacks the key shows '–'. The seed is kept (these are runs someone picked to compare)."""
    flat = [flatten(c) for c in configs.values()]
    keys = set().union(*flat) if flat else set()
    out = []
    for k in sorted(keys):
        if k in ignored or any(_covered(k, f, {}) for f in flat):
            continue
        vals = [f.get(k, _MISSING) for f in flat]
        if any(v != vals[0] for v in vals[1:]):
            out.append((k, [_show(v) for v in vals]))
    return out
