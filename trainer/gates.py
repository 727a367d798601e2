"""Attention gates as data: one ``Gate`` module for every ``GateSpec`` (contract/config.py).

Scores live in the (B, T, H, D) per-head layout for G1..G4 and (B, T, d_model) for G5:
- elementwise: one score per channel, logits (B, T, H, D)
- headwise: one score per head, logits (B, T, H, 1), broadcast over the head's channels
- head_shared: per-head elementwise scores computed (so the parameters equal head-specific
  elementwise), activated, then averaged over the heads -> (B, T, 1, D)
Heads are the query heads for G1/G4 and the key/value heads for G2/G3 (the paper's n x q x dk
vs n x k x dk score shapes).

combine: multiplicative Y * s or additive Y + s, with s = act(X W) (input-dependent, X the
pre-normed block input) or s = act(P) for a zero-initialised parameter P (input-independent).
Gates have no bias (the paper's "Added (M)" column counts none).

Projection init: normal(0, init_std) like every other projection (as the reference
implementation does). It starts each sigmoid gate near 0.5 with a little input dependence, so
the gate learns from step 0; zeroing the weight gives exactly act(0), which the tests use.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from contract.config import GateSpec
from contract.gate_positions import SDPA_OUTPUT
from contract.gate_shapes import gate_heads, score_shape


def ns_sigmoid(x: torch.Tensor) -> torch.Tensor:
    """Non-sparse sigmoid 0.5 + 0.5*sigmoid(x), in [0.5, 1]."""
    return 0.5 + 0.5 * torch.sigmoid(x)


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "ns_sigmoid": ns_sigmoid,
    "identity": lambda x: x,
}


class Gate(nn.Module):
    """One gate at one position of one layer.

    ``fused=True`` (G1, input-dependent): the projection lives in q_proj (one GEMM) and the
    caller passes its slice as ``logits`` to :meth:`scores`.
    """

    def __init__(self, spec: GateSpec, n_heads: int, head_dim: int, d_model: int,
                 init_std: float, fused: bool = False) -> None:
        super().__init__()
        self.spec = spec
        self.shape = score_shape(spec, n_heads, head_dim, d_model)
        self.width = math.prod(self.shape)
        self.fused = fused and spec.input_dependent
        self.act = ACTIVATIONS[spec.activation]
        self.proj: nn.Linear | None = None
        self.logit: nn.Parameter | None = None
        if not spec.input_dependent:
            self.logit = nn.Parameter(torch.zeros(self.shape))
        elif not self.fused:
            self.proj = nn.Linear(d_model, self.width, bias=False)
            nn.init.normal_(self.proj.weight, std=init_std)

    def scores(self, x: torch.Tensor, logits: torch.Tensor | None = None) -> torch.Tensor:
        """Gate scores for block input x (B, T, d_model): (B, T, *shape) or (*shape) if constant.

        Head-shared scores are averaged over heads: (B, T, 1, D).
        """
        if self.logit is not None:
            z: torch.Tensor = self.logit
        else:
            if logits is None:
                if self.proj is None:
                    raise RuntimeError("fused G1 gate: pass the q_proj gate slice as logits")
                logits = self.proj(x)
            z = logits.view(*x.shape[:-1], *self.shape)
        s = self.act(z)
        if self.spec.sharing == "head_shared":
            s = s.mean(dim=-2, keepdim=True)  # average the per-head scores over heads
        return s

    def combine(self, y: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        """Y * s or Y + s; y is (B, T, H, D) or (B, T, d_model), s broadcasts to it."""
        return y * s if self.spec.combine == "multiplicative" else y + s

    def forward(self, y: torch.Tensor, x: torch.Tensor,
                logits: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(gated y, scores)."""
        s = self.scores(x, logits)
        return self.combine(y, s), s


def build_gates(gates: tuple[GateSpec, ...], n_head: int, n_kv_head: int, head_dim: int,
                d_model: int, init_std: float) -> nn.ModuleDict:
    """A ModuleDict keyed by position; G1 input-dependent gates are fused into q_proj when
    that keeps q_proj's width a multiple of 8."""
    def fused(g: GateSpec, heads: int) -> bool:  # the attention module fuses G1 only
        return g.position == SDPA_OUTPUT and _aligned(score_shape(g, heads, head_dim, d_model))

    return nn.ModuleDict({
        g.position: Gate(g, heads, head_dim, d_model, init_std, fused=fused(g, heads))
        for g in gates
        for heads in (gate_heads(g.position, n_head, n_kv_head),)
    })


def _aligned(shape: tuple[int, ...]) -> bool:
    """Fusing W gate columns into q_proj pays only if the fused width stays a multiple of 8:
    a headwise G1 gate adds n_head columns (390 at `small`), and a bf16 GEMM of odd width, plus
    the misaligned row stride it gives q, cost +7.5 % step time on an H200 (docs/benchmarks.md)
    against +1 % for the aligned elementwise gate. Such gates keep their own small projection."""
    return math.prod(shape) % 8 == 0
