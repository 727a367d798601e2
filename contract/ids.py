"""THE rule for reading an integer out of text someone typed or linked: ASCII digits only.

Run ids on the CLI (``show 7``, ``rerun 7``), the dashboard's ``?run=7``, list indices in
dotted sweep keys (``model.gates.0.position``) and the keys pydantic names all go through
here. ``str.isdigit()`` is not the rule: it accepts ``'²'`` (``int()`` then raises) and
``'١٢'`` (``int()`` reads 12), so a URL or a key holding them crashed or meant another run.
"""

from __future__ import annotations

MAX_ID = 2**63 - 1  # SQL's BIGINT: a longer digit string cannot be an id, only a name


def is_ascii_int(text: str) -> bool:
    """True for a non-empty string of the digits 0-9 and nothing else."""
    return text.isascii() and text.isdigit()


def ascii_int(text: str) -> int | None:
    """``int(text)`` when ``text`` is ASCII digits only, else None."""
    return int(text) if is_ascii_int(text) else None


def parse_id(text: object) -> int | None:
    """A row id from ``text`` (an int, or ASCII digits within MAX_ID), else None: the text is
    a name, never an id."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text <= MAX_ID else None
    value = ascii_int(text) if isinstance(text, str) else None
    return value if value is not None and value <= MAX_ID else None
