"""THE table of gate positions (contract): what each position gates, whose heads it has, how
it sorts and how the paper labels it. Everything else derives from it: the config's
``Position`` type and its head rule (contract/config.py), the score shapes
(contract/gate_shapes.py), the order of a '+'-joined ``gate_position`` (contract/gate_dims.py)
and the dashboard's row labels (dashboard/labels.py). Adding a position is a row here plus
its place in the attention module's forward pass (trainer/attention.py).

Positions follow the gated-attention paper: G1 on the per-head SDPA output before o_proj,
G2/G3/G4 on v/k/q, G5 after o_proj.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

HeadKind = Literal["query", "kv"]
# Table 1's notation for a score shape: q query heads, k key-value heads ("n×q×dk").
_HEADS_LABEL: dict[HeadKind, str] = {"query": "q", "kv": "k"}


@dataclass(frozen=True)
class GatePosition:
    name: str  # the config's value and the runs table's gate_position
    site: str  # the paper's name of the gated tensor: "SDPA Elementwise G1", "v Head-Shared G2"
    heads: HeadKind | None  # whose heads the gated tensor is split into; None: no heads
    where: str  # where in the block it acts (error messages)

    @property
    def has_heads(self) -> bool:
        """Headwise and head-shared gates need heads to score (G5 after o_proj has none)."""
        return self.heads is not None

    @property
    def heads_label(self) -> str | None:
        """'q' or 'k' in a score shape ('n×q×dk'); None without heads."""
        return None if self.heads is None else _HEADS_LABEL[self.heads]


# Named positions, for the modules that act at one of them (the attention module wires each
# into its forward pass; the non-linearity-only control sits at the SDPA output).
SDPA_OUTPUT, VALUE, KEY, QUERY, DENSE_OUTPUT = "G1", "G2", "G3", "G4", "G5"

# In order: the index is a position's rank when several gates are listed ("G1+G2").
TABLE: tuple[GatePosition, ...] = (
    GatePosition(SDPA_OUTPUT, "SDPA", "query", "on the per-head SDPA output before o_proj"),
    GatePosition(VALUE, "v", "kv", "on v"),
    GatePosition(KEY, "k", "kv", "on k"),
    GatePosition(QUERY, "q", "query", "on q"),
    GatePosition(DENSE_OUTPUT, "Dense Output", None, "after o_proj"),
)
POSITIONS: dict[str, GatePosition] = {p.name: p for p in TABLE}
NAMES: tuple[str, ...] = tuple(POSITIONS)
DEFAULT = SDPA_OUTPUT  # GateSpec's default position: the paper's best gate
NONLINEARITY_SITE = SDPA_OUTPUT  # where the non-linearity-only control acts (model.nonlinearity)

HEAD_POSITIONS: tuple[str, ...] = tuple(p.name for p in TABLE if p.has_heads)
KV_POSITIONS: tuple[str, ...] = tuple(p.name for p in TABLE if p.heads == "kv")


def order(name: str) -> int:
    """A position's rank in TABLE; an unknown name (a hand-written stored config) sorts last."""
    return NAMES.index(name) if name in POSITIONS else len(NAMES)
