"""Parameter counts on the meta device (no memory), the "Added (M)" column, param matching.

``count_params`` instantiates the real model on the meta device, so the counts are those of the
code that trains, not of a formula that could drift from it. Gate parameters include the G1
rows fused into q_proj.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from trainer.config import ModelConfig

D_FF_MULTIPLE = 8  # param_match rounds d_ff to this (GEMM-friendly widths)


@dataclass(frozen=True)
class ParamCounts:
    total: int  # unique parameters (a tied embedding counted once)
    gates: int  # all gate parameters (fused G1 rows included)
    embedding: int  # token embedding (+ untied LM head)
    attention: int  # q/k/v/o projections + QK-norm, excluding gates
    ffn: int  # dense SwiGLU, or MoE experts + routers
    norms: int  # block, final, sandwich and G1-RMSNorm weights
    switch_head: int  # SwitchHead routers and extra experts' weights (whole projections)

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding


def _numel(params) -> int:
    return sum(p.numel() for p in params)


def count_params(cfg: ModelConfig, device: str | torch.device = "meta") -> ParamCounts:
    """Build ``cfg`` on ``device`` (meta by default: no memory) and count.

    Meta counts are cached per config. Counts are global: with expert parallelism a rank holds
    only n_experts / ep_size experts, so the model is counted as if ep_size were 1.
    """
    if cfg.moe is not None and cfg.moe.ep_size != 1:
        cfg = cfg.model_copy(update={"moe": cfg.moe.model_copy(update={"ep_size": 1})})
    if str(device) == "meta":
        return _count_meta(cfg.model_dump_json())
    return _count(cfg, device)


@functools.lru_cache(maxsize=256)
def _count_meta(cfg_json: str) -> ParamCounts:
    return _count(ModelConfig.model_validate_json(cfg_json), "meta")


def _count(cfg: ModelConfig, device: str | torch.device) -> ParamCounts:
    """Count the real modules. Blocks are identical, so on the meta device one block is built
    and multiplied by n_layer (the paper MoE's 3,072 experts would take seconds to deep-copy);
    tests check this against a full build on the CPU."""
    from trainer.model import build_model

    one_block = str(device) == "meta"
    model = build_model(cfg.model_copy(update={"n_layer": 1}) if one_block else cfg, device)
    mult = cfg.n_layer if one_block else 1
    blocks = sum(p.numel() for p in model.blocks.parameters()) * mult
    embedding = model.embed.weight.numel() + (
        0 if cfg.tie_embeddings else model.lm_head.weight.numel())
    gates = model.n_gate_params() * mult
    norms = sum(_numel(m.parameters()) for m in model.blocks.modules()
                if type(m).__name__ == "RMSNorm") * mult + model.norm.weight.numel()
    ffn = sum(_numel(b.ffn.parameters()) for b in model.blocks) * mult
    sh = sum(_numel(m.parameters()) for b in model.blocks for m in (b.attn.k_proj, b.attn.v_proj)
             if type(m).__name__ == "SwitchProjection") * mult
    total = embedding + blocks + model.norm.weight.numel()
    attention = total - embedding - ffn - norms - gates - sh
    return ParamCounts(total=total, gates=gates, embedding=embedding, attention=attention,
                       ffn=ffn, norms=norms, switch_head=sh)


def baseline_config(cfg: ModelConfig) -> ModelConfig:
    """The same model without gates, non-linearity control, SwitchHead or param matching."""
    return cfg.model_copy(update={"gates": (), "nonlinearity": "none", "switch_head": None,
                                  "param_match": False})


def added_params(cfg: ModelConfig) -> int:
    """Parameters added vs ``baseline_config(cfg)`` (the paper's "Added (M)" column)."""
    return count_params(cfg).total - count_params(baseline_config(cfg)).total


def effective_d_ff(cfg: ModelConfig) -> int | None:
    """The dense FFN width to build: cfg.d_ff, or shrunk so the total matches the baseline.

    param_match removes added/(3 * d_model * n_layer) hidden units (SwiGLU has three d x d_ff
    matrices per layer), rounded to the nearest multiple of D_FF_MULTIPLE, so the totals agree
    to within 3 * d_model * n_layer * D_FF_MULTIPLE / 2 parameters.
    """
    if not cfg.param_match or cfg.d_ff is None:
        return cfg.d_ff
    added = added_params(cfg.model_copy(update={"param_match": False}))
    per_unit = 3 * cfg.d_model * cfg.n_layer
    d_ff = round((cfg.d_ff - added / per_unit) / D_FF_MULTIPLE) * D_FF_MULTIPLE
    if d_ff < D_FF_MULTIPLE:
        raise ValueError(f"model.param_match: the gates add {added} parameters, more than the "
                         f"FFN (d_ff={cfg.d_ff}) can give back; use a larger d_ff")
    return d_ff
