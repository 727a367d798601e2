"""The parameter-count oracle: build the real model on the meta device and count its tensors.

contract/params.py counts by arithmetic (fast, no torch); this module counts the code that
trains, so tests can hold the arithmetic to it. It sits above trainer/model.py (it builds
models), params.py below it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from contract.config import ModelConfig
from contract.params import ParamCounts
from trainer.model import build_model


def _numel(params: Iterable[torch.nn.Parameter]) -> int:
    return sum(p.numel() for p in params)


def meta_count(cfg: ModelConfig, device: str | torch.device = "meta") -> ParamCounts:
    """Build ``cfg`` on ``device`` (meta by default: no memory) and count, as if ep_size = 1."""
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
    one_block = str(device) == "meta"
    model = build_model(cfg.model_copy(update={"n_layer": 1}) if one_block else cfg, device)
    mult = cfg.n_layer if one_block else 1
    blocks = _numel(model.blocks.parameters()) * mult
    embedding = model.embed.weight.numel() + (
        0 if cfg.tie_embeddings else model.lm_head.weight.numel())
    gates = model.n_gate_params() * mult
    norms = sum(_numel(m.parameters()) for m in model.blocks.modules()
                if type(m).__name__ == "RMSNorm") * mult + model.norm.weight.numel()
    ffn = sum(_numel(b.ffn.parameters()) for b in model.layers()) * mult
    sh = sum(_numel(m.parameters()) for b in model.layers() for m in (b.attn.k_proj, b.attn.v_proj)
             if type(m).__name__ == "SwitchProjection") * mult
    nsa = sum(_numel(b.attn.nsa.parameters()) for b in model.layers()
              if b.attn.nsa is not None) * mult
    total = embedding + blocks + model.norm.weight.numel()
    attention = total - embedding - ffn - norms - gates - sh - nsa
    return ParamCounts(total=total, gates=gates, embedding=embedding, attention=attention,
                       ffn=ffn, norms=norms, switch_head=sh, nsa=nsa)
