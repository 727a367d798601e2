"""Random draws keyed by name: a ``torch.Generator`` per key, seeded from the key's sha256.

What a keyed draw gives depends on its key only, never on how many draws came before it, so
adding a draw somewhere (a gate, a data source) cannot shift another. hashlib, not Python's
``hash()`` (salted per process). Training batches (trainer/batches.py) and paired initial
weights (trainer/initialise.py) draw from these.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch


def keyed_generator(*parts: int | str) -> torch.Generator:
    """A CPU generator seeded from sha256 of ``parts`` joined by ':' (63 bits of it)."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


@dataclass(frozen=True)
class Part:
    """A piece of one parameter that draws from a key of its own (paired initialisation).

    ``key`` names the draw relative to the module that declares the part (``init_parts``);
    ``shape`` is the shape drawn, the one the key's owner has where it is a whole parameter
    (the unfused model's), so a fused tensor gets exactly the values the unfused one does;
    ``index`` selects the receiving view of the parameter (reshaped to it).
    """

    key: str
    shape: tuple[int, ...]
    index: tuple[slice | int, ...]
