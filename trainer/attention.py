"""Causal self-attention with GQA, optional QK-norm, RoPE and gates G1..G5; or, with
``model.nsa``, Native Sparse Attention (trainer/nsa.py) in place of the dense softmax.

Where each gate acts (all read the pre-normed block input x, like q/k/v):
- G4 on q and G3 on k after QK-norm and *before* RoPE: a per-channel scale after the rotation
  would break RoPE's relative-position property, and a headwise scale before QK-norm would be
  normalised away.
- G2 on v (after the v projection).
- G1 on the per-head SDPA output before o_proj; its projection is fused into q_proj when
  that keeps q_proj's width a multiple of 8 (trainer/gates.py `_aligned`).
- G5 on the o_proj output.

Normal steps use ``F.scaled_dot_product_attention(is_causal=True)``. When ``self.record`` is a
list (set by ``GatedLM.probe``), the explicit-softmax path runs instead and appends this
layer's attention statistics; probes therefore cost nothing on normal steps. Under NSA the
attention-sink probe reads the selected branch, the one that can reach the first token at any
distance (the window cannot, and a compressed key is a summary of a block, not a token); the
gate-score probe also reads NSA's mean weight per branch (trainer/nsa_combine.py).
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from contract.config import ModelConfig
from contract.gate_positions import DENSE_OUTPUT, KEY, QUERY, SDPA_OUTPUT, VALUE
from trainer.gates import Gate, build_gates
from trainer.keyed import Part
from trainer.norms import RMSNorm
from trainer.nsa import NativeSparseAttention
from trainer.probes import first_token_column
from trainer.rope import apply_rope
from trainer.switch_head import SwitchProjection


def explicit_attention(q: torch.Tensor, k: torch.Tensor,
                       v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal softmax attention written out. q (B, H, T, D), k/v (B, Hkv, T, D).

    Returns (y (B, H, T, D), att (B, H, T, T)). KV heads are repeated like SDPA's enable_gqa
    (query head h reads kv head h // (H / Hkv)).
    """
    rep = q.size(1) // k.size(1)
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    T = q.size(2)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))  # (B, H, T, T)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return att @ v, att


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        d, hd = cfg.d_model, cfg.head_dim
        self.gates = build_gates(cfg.gates, cfg.n_head, cfg.n_kv_head, hd, d, cfg.init_std)
        g1 = cast(Gate, self.gates[SDPA_OUTPUT]) if SDPA_OUTPUT in self.gates else None
        self.g1_width = g1.width if g1 is not None and g1.fused else 0
        # one GEMM for q and the G1 gate logits, split after
        self.q_proj = nn.Linear(d, cfg.n_head * hd + self.g1_width, bias=False)
        self.k_proj = _kv_projection(cfg, "k")
        self.v_proj = _kv_projection(cfg, "v")
        self.o_proj = nn.Linear(cfg.n_head * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(hd, cfg.norm_eps) if cfg.qk_norm else None
        self.nonlinearity = cfg.nonlinearity
        self.g1_norm = RMSNorm(hd, cfg.norm_eps) if cfg.nonlinearity == "rmsnorm" else None
        self.first_gate = cfg.gates[0].position if cfg.gates else None
        self.nsa = NativeSparseAttention(cfg) if cfg.nsa is not None else None
        self.record: list[dict[str, Any]] | None = None  # set by GatedLM.probe

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape  # x: pre-normed block input (B, T, d_model)
        scores: dict[str, torch.Tensor] = {}
        q, g1_logits = self.q_proj(x).split([self.n_head * self.head_dim, self.g1_width], -1)
        q = q.view(B, T, self.n_head, self.head_dim)  # (B, T, H, D)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.head_dim)  # (B, T, Hkv, D)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.head_dim)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = self._gate(QUERY, q, x, scores)
        k = self._gate(KEY, k, x, scores)
        v = self._gate(VALUE, v, x, scores)
        y = self._mix(x, q, k, v, cos, sin)  # (B, T, H, D)
        y = self._gate(SDPA_OUTPUT, y, x, scores, g1_logits if self.g1_width else None)
        if self.g1_norm is not None:  # nonlinearity == "rmsnorm"
            y = self.g1_norm(y)
        elif self.nonlinearity == "silu":
            y = F.silu(y)
        y = self.o_proj(y.reshape(B, T, self.n_head * self.head_dim))  # (B, T, d_model)
        y = self._gate(DENSE_OUTPUT, y, x, scores)
        if self.record is not None and self.first_gate is not None:
            self.record[-1]["gate_scores"] = scores[self.first_gate].detach().float().flatten()
        return y

    def _gate(self, pos: str, y: torch.Tensor, x: torch.Tensor, scores: dict[str, torch.Tensor],
              logits: torch.Tensor | None = None) -> torch.Tensor:
        if pos not in self.gates:
            return y
        y, scores[pos] = self.gates[pos](y, x, logits)
        return y

    def _mix(self, x: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """q (B, T, H, D), k/v (B, T, Hkv, D) before RoPE -> (B, T, H, D): dense or NSA."""
        if self.nsa is not None:
            out: tuple[torch.Tensor, torch.Tensor | None] = self.nsa(
                x, q, k, v, cos, sin, weights=self.record is not None)
            if self.record is not None and out[1] is not None:  # the selected branch's sink
                self.record.append({"first_token": first_token_column(out[1]),
                                    "branch_weights": self.nsa.combine.branch_means(x)})
            return out[0]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = self._attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        return y.transpose(1, 2)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """q (B, H, T, D), k/v (B, Hkv, T, D) -> (B, H, T, D)."""
        if self.record is None:  # fast path
            return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                  enable_gqa=self.n_head != self.n_kv_head)
        y, att = explicit_attention(q, k, v)
        # mass on key 0, per query, averaged over batch and heads: (T,)
        self.record.append({"first_token": first_token_column(att)})
        return y

    def init_parts(self) -> dict[str, list[Part]]:
        """Paired init (trainer/initialise.py): q_proj's q rows draw what an ungated q_proj
        does, the fused G1 rows what the unfused gate's own projection would."""
        if not self.g1_width:
            return {}
        d, n_q = self.q_proj.in_features, self.n_head * self.head_dim
        return {"q_proj.weight": [
            Part("q_proj.weight", (n_q, d), (slice(0, n_q),)),
            Part(f"gates.{SDPA_OUTPUT}.proj.weight", (self.g1_width, d), (slice(n_q, None),))]}

    def n_gate_params(self) -> int:
        """Gate parameters, including the G1 rows fused into q_proj."""
        own = sum(p.numel() for p in self.gates.parameters())
        return own + self.g1_width * self.q_proj.in_features


def _kv_projection(cfg: ModelConfig, which: str) -> nn.Module:
    """nn.Linear, or a SwitchHead expert mixture when cfg.switch_head targets it."""
    sh = cfg.switch_head
    if sh is not None and which in sh.targets:
        return SwitchProjection(cfg.d_model, cfg.n_kv_head, cfg.head_dim, sh.n_experts,
                                sh.top_k, cfg.init_std)
    return nn.Linear(cfg.d_model, cfg.n_kv_head * cfg.head_dim, bias=False)
