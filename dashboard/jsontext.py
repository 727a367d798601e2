"""JSON text from outside the dashboard (a link's query value, a JSON column of the DB) parsed
within bounds: its size and nesting depth are checked before ``json.loads`` sees it (whose
recursion 5,000 nested brackets exhaust), and NaN, Infinity and integers longer than a float
holds are refused, so what comes back is finite plain data or a ValueError."""

from __future__ import annotations

import json
import math
from typing import Any

MAX_INT_DIGITS = 20  # beyond this a number is no id, step or LR anyone typed


def depth(text: str) -> int:
    """The deepest nesting of [ and { in JSON ``text`` (brackets inside strings do not
    count); a linear scan, so any length is measured without recursion."""
    deepest = level = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            level += 1
            deepest = max(deepest, level)
        elif ch in "]}":
            level -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is not a finite number")
    return value


def loads(text: str, *, max_chars: int, max_depth: int) -> Any:
    """``json.loads(text)`` when ``text`` has at most ``max_chars`` characters, nests at
    most ``max_depth`` levels and holds only finite numbers; else ValueError saying why."""
    if len(text) > max_chars:
        raise ValueError(f"{len(text)} characters (at most {max_chars})")
    if (d := depth(text)) > max_depth:
        raise ValueError(f"nested {d} levels deep (at most {max_depth})")
    return json.loads(text, parse_constant=_refuse_constant, parse_int=_int,
                      parse_float=_float)
