"""Feed-forward blocks: SwiGLU (dense) and a DeepSpeed MoE of SwiGLU experts.

MoE goes through ``deepspeed.moe.layer.MoE``. DeepSpeed 0.19.8 routes top-1 and top-2 with
its GShard gates and any k > 2 with ``topkgating`` (softmax, top-k, renormalise the kept
gates, load-balancing loss mean(me*ce)*E^2/k), so the paper's top-8 of 128 needs no code of
our own. Choices made for reproducibility: no noisy gating, no random token selection and no
sampled second expert, so routing is a deterministic function of the input.

Capacity: tokens beyond ``capacity_factor * k * tokens / E`` per expert are dropped (the
standard GShard behaviour, what ``moe.capacity_factor`` means). Dropping is decided over the
whole batch, so with MoE a future token can evict a past token from a full expert: strict
causality holds for dense FFNs only (tests check causality on dense models).

DeepSpeed's top-1 gate asserts at least ``min_capacity`` tokens per batch; the floor is
lowered to the batch's token count for tiny batches (generation prompts).

The expert-parallel process group is created by ``deepspeed.initialize`` (it calls
``set_deepspeed_parallelism``); with ep_size=1 a plain forward needs no group.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from contract.config import MoEConfig

MIN_CAPACITY = 4


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)), no biases."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cast(torch.Tensor, self.down(F.silu(self.gate(x)) * self.up(x)))


class MoEFFN(nn.Module):
    """DeepSpeed MoE of SwiGLU experts. forward(x (B, T, C)) -> (y (B, T, C), aux loss 0-dim)."""

    def __init__(self, d_model: int, moe: MoEConfig) -> None:
        super().__init__()
        from deepspeed.moe.layer import MoE  # local: dense models never import DeepSpeed

        self.k = moe.top_k
        self.moe = MoE(hidden_size=d_model, expert=SwiGLU(d_model, moe.d_expert),
                       num_experts=moe.n_experts, ep_size=moe.ep_size, k=moe.top_k,
                       capacity_factor=moe.capacity_factor,
                       eval_capacity_factor=moe.capacity_factor, min_capacity=MIN_CAPACITY,
                       noisy_gate_policy=None, drop_tokens=True, use_rts=False,
                       top2_2nd_expert_sampling=False)
        self.last_expert_counts: torch.Tensor | None = None  # (E,) tokens routed per expert

    @property
    def router(self) -> nn.Linear:
        return cast(nn.Linear, self.moe.deepspeed_moe.gate.wg)

    @property
    def experts(self) -> nn.ModuleList:
        return cast(nn.ModuleList, self.moe.deepspeed_moe.experts.deepspeed_experts)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # DeepSpeed's top-1 gate asserts tokens >= min_capacity; a short generation prompt
        # would crash it, so the floor never exceeds the tokens at hand
        n_tokens = x.numel() // x.size(-1)
        self.moe.deepspeed_moe.gate.min_capacity = min(MIN_CAPACITY, n_tokens)
        y, aux, counts = self.moe(x)
        self.last_expert_counts = counts
        return y, aux
