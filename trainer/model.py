"""The decoder-only LM with attention gates: ``build_model(cfg) -> GatedLM``.

Token embedding -> n_layer x [pre-RMSNorm attention (GQA, RoPE, QK-norm, gates G1..G5),
pre-RMSNorm SwiGLU or DeepSpeed-MoE FFN] -> final RMSNorm -> LM head (tied or not).
Baselines of the paper's Table 6: ``norm_style: sandwich`` adds an RMSNorm on each sub-layer
output before the residual add; ``clip_residual: c`` clamps each sub-layer output to +-c
(after the sandwich norm when both are set) and counts what it clipped (``GatedLM.clip_rate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from contract.config import ModelConfig
from contract.params import effective_d_ff
from trainer.attention import Attention
from trainer.dist import ensure_single_process_dist
from trainer.initialise import initialise_paired
from trainer.moe import MoEFFN, SwiGLU
from trainer.norms import RMSNorm
from trainer.probes import ProbeResult, first_token_share
from trainer.rope import RopeScaling, rope_cache


@dataclass
class ModelOutput:
    logits: torch.Tensor  # (B, T, V)
    loss: torch.Tensor | None  # ce_loss + aux_loss_coef * aux_loss; None without targets
    ce_loss: torch.Tensor | None
    aux_loss: torch.Tensor  # 0-dim; sum of the MoE layers' load-balancing losses, 0 for dense


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, d_ff: int | None) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        # ModelConfig holds exactly one of d_ff / moe (validated), so d_ff is set without MoE
        self.ffn: nn.Module = (MoEFFN(cfg.d_model, cfg.moe) if cfg.moe
                               else SwiGLU(cfg.d_model, cast(int, d_ff)))
        sandwich = cfg.norm_style == "sandwich"
        self.attn_post_norm = RMSNorm(cfg.d_model, cfg.norm_eps) if sandwich else None
        self.ffn_post_norm = RMSNorm(cfg.d_model, cfg.norm_eps) if sandwich else None
        self.clip = cfg.clip_residual
        # running (clipped, total) counts, a plain attribute (not state): reset by clip_rate()
        self.clip_stats: torch.Tensor | None = None

    def forward(self, h: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        h = h + self._post(self.attn(self.attn_norm(h), cos, sin), self.attn_post_norm)
        aux = None
        f = self.ffn(self.ffn_norm(h))
        if isinstance(f, tuple):
            f, aux = f
        h = h + self._post(f, self.ffn_post_norm)
        return h, aux

    def _post(self, y: torch.Tensor, norm: RMSNorm | None) -> torch.Tensor:
        """Sub-layer output before the residual add: sandwich norm, then clipping."""
        if norm is not None:
            y = norm(y)
        if self.clip is not None:
            if self.training and torch.is_grad_enabled():  # training steps only, not eval/probe
                clipped = (y.detach().abs() > self.clip).sum()
                stats = torch.stack([clipped, clipped.new_tensor(y.numel())])  # no host sync
                self.clip_stats = stats if self.clip_stats is None else self.clip_stats + stats
            y = y.clamp(-self.clip, self.clip)
        return y


class GatedLM(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()  # cfg is validated (even head_dim etc.): contract/config.py
        self.cfg = cfg
        self.d_ff = effective_d_ff(cfg)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, self.d_ff) for _ in range(cfg.n_layer))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.rope_scaling: RopeScaling | None = None
        self._rope: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        if cfg.init == "legacy":  # paired: build_model draws every weight afterwards
            self.apply(self._init_weights)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def _init_weights(self, m: nn.Module) -> None:
        """The legacy scheme (model.init: legacy): the global RNG in module order."""
        # meta tensors have no values: skipping saves seconds when counting the paper models
        if isinstance(m, (nn.Linear, nn.Embedding)) and not m.weight.is_meta:
            nn.init.normal_(m.weight, mean=0.0, std=self.cfg.init_std)

    def set_rope_scaling(self, scaling: RopeScaling | None) -> None:
        """Use scaled RoPE frequencies from now on (None: plain RoPE)."""
        self.rope_scaling = scaling
        self._rope.clear()

    def _rope_tables(self, T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        key = (T, str(device))
        if key not in self._rope:
            self._rope[key] = rope_cache(self.cfg.head_dim, T, self.cfg.rope_base,
                                         self.rope_scaling, device=device)
        return self._rope[key]

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> ModelOutput:
        B, T = idx.shape  # idx (B, T) token ids
        cos, sin = self._rope_tables(T, idx.device)
        h = self.embed(idx)  # (B, T, C)
        aux = h.new_zeros((), dtype=torch.float32)
        for block in self.blocks:
            h, block_aux = block(h, cos, sin)
            if block_aux is not None:
                aux = aux + block_aux
        logits = self.lm_head(self.norm(h))  # (B, T, V)
        if targets is None:
            return ModelOutput(logits, None, None, aux)
        ce = F.cross_entropy(logits.float().view(B * T, -1), targets.reshape(B * T))
        coef = self.cfg.moe.aux_loss_coef if self.cfg.moe else 0.0
        return ModelOutput(logits, ce + coef * aux, ce, aux)

    @torch.no_grad()
    def probe(self, idx: torch.Tensor) -> ProbeResult:
        """Run the explicit-softmax path on this batch and return the per-layer probes."""
        maxima: list[float] = []
        hooks = [b.register_forward_hook(lambda _m, _i, out: maxima.append(
            float(out[0].detach().abs().max()))) for b in self.blocks]
        records: list[dict[str, Any]] = []
        for b in self.layers():
            b.attn.record = []
        try:
            self(idx)
            records = [b.attn.record[0] for b in self.layers() if b.attn.record is not None]
        finally:
            for h in hooks:
                h.remove()
            for b in self.layers():
                b.attn.record = None
        return ProbeResult(first_token_attention=[first_token_share(r["first_token"])
                                                  for r in records],
                           max_activation=maxima,
                           gate_scores=[r.get("gate_scores") for r in records],
                           branch_weights=[r.get("branch_weights") for r in records])

    def clip_rate(self) -> float:
        """Fraction of sub-layer output values clipped since the last call, then reset.

        Counts training forwards only (training mode, grad enabled), so validation and probe
        passes do not dilute ``stability/clip_rate``. 0.0 when clip_residual is off or no
        training forward ran.
        """
        stats = [b.clip_stats for b in self.layers() if b.clip_stats is not None]
        for b in self.layers():
            b.clip_stats = None
        if not stats:
            return 0.0
        clipped, total = torch.stack(stats).sum(dim=0).tolist()
        return clipped / total if total else 0.0

    def layers(self) -> list[Block]:
        """The blocks, typed: iterating an nn.ModuleList yields plain nn.Modules."""
        return cast("list[Block]", list(self.blocks))

    def n_gate_params(self) -> int:
        return sum(b.attn.n_gate_params() for b in self.layers())

    def param_groups(self, weight_decay: float) -> list[dict]:
        """Optimizer groups: weight decay on matrices only (not norms, not the constant gate
        logits, whose decay would pull the gate towards act(0)); with MoE the experts are
        split into DeepSpeed's MoE groups, which ZeRO 1/2 require."""
        decay: list[nn.Parameter] = []
        no_decay: list[nn.Parameter] = []
        for name, p in self.named_parameters():
            if p.requires_grad:
                (decay if p.ndim >= 2 and not name.endswith(".logit") else no_decay).append(p)
        groups = [{"params": decay, "weight_decay": weight_decay, "name": "decay"},
                  {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"}]
        if self.cfg.moe is None:
            return groups
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

        return cast("list[dict[Any, Any]]",
                    split_params_into_different_moe_groups_for_optimizer(groups))


def build_model(cfg: ModelConfig, device: torch.device | str | None = None,
                seed: int = 0) -> GatedLM:
    """Construct and initialise (normal(0, cfg.init_std); norms 1; constant gates 0).

    ``cfg.init`` says from what: ``paired`` (the default) draws each parameter from its
    (``seed``, name) key (trainer/initialise.py); ``legacy`` from the global RNG in module
    order (the caller seeds it; ``seed`` is unused). MoE models first make sure
    torch.distributed is up (DeepSpeed's MoE expects it).
    """
    if cfg.moe is not None and str(device) != "meta":
        ensure_single_process_dist()
    if device is None:
        model = GatedLM(cfg)
    else:
        with torch.device(device):
            model = GatedLM(cfg)
    if cfg.init == "paired":
        initialise_paired(model, seed, cfg.init_std)
    return model
