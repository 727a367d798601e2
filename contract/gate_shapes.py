"""Gate score shapes and parameter counts: pure arithmetic on a GateSpec (no torch).

The one owner of "how many scores does a gate produce and how many parameters does it add";
trainer/gates.py builds its modules from these, and contract/params.py counts with them, so the
analytic parameter count and the built model cannot disagree on a gate's shape.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # contract.config validates param_match with this arithmetic: no cycle
    from contract.config import GateSpec


# THE heads of each position: the config's validation (no headwise/head-shared gate where there
# are no heads) and the shapes below read them here.
KV_POSITIONS = ("G2", "G3")  # value / key: scored per key-value head
QUERY_POSITIONS = ("G1", "G4")  # SDPA output / query: scored per query head
HEAD_POSITIONS = (*QUERY_POSITIONS, *KV_POSITIONS)  # G5 (after o_proj) has no heads


def gate_heads(position: str, n_head: int, n_kv_head: int) -> int:
    """Heads a gate scores: query heads at G1/G4 (and G5's unused slot), kv heads at G2/G3."""
    return n_kv_head if position in KV_POSITIONS else n_head


def score_shape(spec: GateSpec, n_heads: int, head_dim: int, d_model: int) -> tuple[int, ...]:
    """Per-token logit shape: (H, D) | (H, 1) for headwise | (d_model,) at G5."""
    if spec.position not in HEAD_POSITIONS:
        return (d_model,)
    return (n_heads, 1) if spec.granularity == "headwise" else (n_heads, head_dim)


def gate_width(spec: GateSpec, n_heads: int, head_dim: int, d_model: int) -> int:
    """Scores per token (the gate projection's output width)."""
    return math.prod(score_shape(spec, n_heads, head_dim, d_model))


def gate_param_count(spec: GateSpec, n_heads: int, head_dim: int, d_model: int) -> int:
    """Parameters a gate adds per layer: d_model * score width (no bias), or the score width
    alone for an input-independent gate (a constant logit per score)."""
    width = gate_width(spec, n_heads, head_dim, d_model)
    return d_model * width if spec.input_dependent else width
