"""Gate score shapes and parameter counts: pure arithmetic on a GateSpec (no torch).

The one owner of "how many scores does a gate produce and how many parameters does it add"
(which positions have heads is the table's, contract/gate_positions.py);
trainer/gates.py builds its modules from these, and contract/params.py counts with them, so the
analytic parameter count and the built model cannot disagree on a gate's shape.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from contract.gate_positions import HEAD_POSITIONS, KV_POSITIONS

if TYPE_CHECKING:  # contract.config validates param_match with this arithmetic: no cycle
    from contract.config import GateSpec


def gate_heads(position: str, n_head: int, n_kv_head: int) -> int:
    """Heads a gate scores (contract/gate_positions.py): kv heads where the position gates a
    key-value tensor, else query heads (also the unused slot of a position without heads)."""
    return n_kv_head if position in KV_POSITIONS else n_head


def score_shape(spec: GateSpec, n_heads: int, head_dim: int, d_model: int) -> tuple[int, ...]:
    """Per-token logit shape: (H, D) | (H, 1) for headwise | (d_model,) where the position
    has no heads (G5)."""
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
