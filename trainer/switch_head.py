"""SwitchHead projections (Csordas et al. 2024), the Table 6 baseline.

Each key/value head h owns E expert projections W[h, e] (head_dim x d_model). Per token a
router scores every (head, expert) pair with a sigmoid (not a softmax: experts do not compete),
keeps the top-k of E per head, and mixes the kept experts' outputs by their scores:

    out[h] = sum_{e in topk_h(x)} sigmoid(x R[h, e]) * (W[h, e] x)

With E = 1, k = 1 this is exactly a headwise multiplicative sigmoid gate on the value (or key)
projection with gate weights R (tests check it). Experts are computed densely and masked:
identical outputs and gradients to a sparse dispatch (unselected experts get exactly zero
gradient), simpler, and fine at the CPU scales this runs; a grouped-GEMM dispatch is the
optimisation for large E.

Parameters per layer and target: E * Hkv * head_dim * d_model (experts) + d_model * Hkv * E
(router); "added" vs the plain projection: (E - 1) * Hkv * head_dim * d_model + router.
"""

from __future__ import annotations

import torch
from torch import nn

from trainer.keyed import Part


class SwitchProjection(nn.Module):
    """Drop-in for a (d_model -> n_heads * head_dim) projection: (B, T, C) -> (B, T, H*D)."""

    def __init__(self, d_model: int, n_heads: int, head_dim: int, n_experts: int, top_k: int,
                 init_std: float) -> None:
        super().__init__()
        if not 1 <= top_k <= n_experts:
            raise ValueError(f"switch_head.top_k: {top_k} must be in 1..n_experts ({n_experts})")
        self.n_heads, self.head_dim = n_heads, head_dim
        self.n_experts, self.top_k = n_experts, top_k
        self.weight = nn.Parameter(torch.empty(n_heads, n_experts, head_dim, d_model))
        self.router = nn.Linear(d_model, n_heads * n_experts, bias=False)
        if not self.weight.is_meta:
            nn.init.normal_(self.weight, std=init_std)
            nn.init.normal_(self.router.weight, std=init_std)

    def init_parts(self) -> dict[str, list[Part]]:
        """Paired init (trainer/initialise.py): expert 0 draws what the plain projection this
        replaces does (its key and (H*D, C) shape), each other expert from a key of its own."""
        shape = (self.n_heads * self.head_dim, self.weight.shape[-1])
        return {"weight": [Part("weight" if e == 0 else f"experts.{e}.weight", shape,
                                (slice(None), e)) for e in range(self.n_experts)]}

    def routing(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, H, E) sigmoid scores with all but each head's top-k zeroed."""
        B, T, _ = x.shape
        scores = torch.sigmoid(self.router(x)).view(B, T, self.n_heads, self.n_experts)
        if self.top_k == self.n_experts:
            keep = torch.ones_like(scores, dtype=torch.bool)
        else:
            top = scores.topk(self.top_k, dim=-1).indices  # (B, T, H, k)
            keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, top, True)
        return scores * keep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        w = self.routing(x)  # (B, T, H, E)
        experts = torch.einsum("btc,hedc->btehd", x, self.weight)  # (B, T, E, H, D)
        out = torch.einsum("btehd,bthe->bthd", experts, w)  # (B, T, H, D)
        return out.reshape(B, T, self.n_heads * self.head_dim)
