"""Parameter counts by arithmetic (no torch): ``count``, ``count_params``, param matching.

``count(cfg) -> (total, gates)`` is what ``orchestrator validate`` prints for every run, so it
must be fast and must not import torch: it is exact arithmetic over the same shape facts the
model is built from (contract/gate_shapes.py for gates). The real model on the meta device
(trainer/meta_params.py) is the oracle: tests/contract/test_params.py checks the two agree,
component by
component, for every preset and for every distinct model of every shipped sweep.

This module sits *below* trainer/model.py (the model asks it for the param-matched d_ff), so it
must never import the model; and below contract/config.py, whose ModelConfig refuses a
param_match that cannot fit (``check_param_match``), so it imports the config for types only.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contract.gate_shapes import gate_heads, gate_param_count

if TYPE_CHECKING:  # contract.config validates param_match with this module: no import cycle
    from contract.config import ModelConfig

D_FF_MULTIPLE = 8  # param_match rounds d_ff to this (GEMM-friendly widths)
NSA_BRANCH_NAMES = ("compressed", "selected", "window")  # trainer/nsa.py's branch order
NSA_BRANCHES = len(NSA_BRANCH_NAMES)


@dataclass(frozen=True)
class ParamCounts:
    total: int  # unique parameters (a tied embedding counted once)
    gates: int  # all gate parameters (fused G1 rows included)
    embedding: int  # token embedding (+ untied LM head)
    attention: int  # q/k/v/o projections, excluding gates, QK-norm and SwitchHead
    ffn: int  # dense SwiGLU, or MoE experts + routers
    norms: int  # block, final, QK-norm, sandwich and G1-RMSNorm weights
    switch_head: int  # SwitchHead routers and extra experts' weights (whole projections)
    nsa: int  # NSA's compression maps and branch gate (projection or learned logits)


def count(cfg: ModelConfig) -> tuple[int, int]:
    """(total, gate) parameters of ``cfg``, exactly those of the built model."""
    c = count_params(cfg)
    return c.total, c.gates


def count_params(cfg: ModelConfig) -> ParamCounts:
    """Every component's parameter count. Global under expert parallelism: a rank holds
    n_experts / ep_size experts, but the model is counted whole (ep_size does not enter)."""
    return _count_cached(cfg)


@functools.lru_cache(maxsize=1024)
def _count_cached(cfg: ModelConfig) -> ParamCounts:
    """Keyed by the frozen (hashable) config itself: a validated config is never re-validated
    from its own JSON to be counted."""
    return _count(cfg)


def _gates_per_layer(cfg: ModelConfig) -> int:
    return sum(gate_param_count(g, gate_heads(g.position, cfg.n_head, cfg.n_kv_head),
                                cfg.head_dim, cfg.d_model) for g in cfg.gates)


def _kv_per_layer(cfg: ModelConfig) -> tuple[int, int]:
    """(plain k/v projection params, SwitchHead projection params) per layer."""
    d, width = cfg.d_model, cfg.n_kv_head * cfg.head_dim
    sh = cfg.switch_head
    switched = len(sh.targets) if sh is not None else 0  # "v" -> 1, "kv" -> 2
    experts = (sh.n_experts * width * d + d * cfg.n_kv_head * sh.n_experts) if sh else 0
    return (2 - switched) * d * width, switched * experts


def nsa_per_layer(cfg: ModelConfig) -> tuple[int, int]:
    """(compression maps, branch gate) parameters of one NSA layer (trainer/nsa.py): a key and
    a value map, each (compress_block * head_dim -> head_dim) shared by the kv heads; the
    gate a (d_model -> n_head * 3) projection (``gated``), n_head * 3 logits (``learned``) or
    nothing (``equal``). (0, 0) for dense attention."""
    nsa = cfg.nsa
    if nsa is None:
        return 0, 0
    compress = 2 * nsa.compress_block * cfg.head_dim * cfg.head_dim
    branches = cfg.n_head * NSA_BRANCHES
    gate = {"gated": cfg.d_model * branches, "learned": branches, "equal": 0}[nsa.combine]
    return compress, gate


def _norms_per_layer(cfg: ModelConfig) -> int:
    d, hd = cfg.d_model, cfg.head_dim
    n = 2 * d  # attn_norm, ffn_norm
    n += 2 * d if cfg.norm_style == "sandwich" else 0
    n += 2 * hd if cfg.qk_norm else 0
    n += hd if cfg.nonlinearity == "rmsnorm" else 0
    return n


def _ffn_per_layer(cfg: ModelConfig) -> int:
    d = cfg.d_model
    if cfg.moe is not None:  # SwiGLU experts + the router's (d, E) weight, no bias
        return cfg.moe.n_experts * 3 * d * cfg.moe.d_expert + d * cfg.moe.n_experts
    d_ff = effective_d_ff(cfg)
    assert d_ff is not None, "ModelConfig holds d_ff when it has no moe (validated)"
    return 3 * d * d_ff


def _count(cfg: ModelConfig) -> ParamCounts:
    L, d = cfg.n_layer, cfg.d_model
    qo = 2 * d * cfg.n_head * cfg.head_dim  # q_proj (without fused G1 rows) + o_proj
    kv, sh = _kv_per_layer(cfg)
    gates, ffn = L * _gates_per_layer(cfg), L * _ffn_per_layer(cfg)
    norms = L * _norms_per_layer(cfg) + d  # + the final norm
    embedding = cfg.vocab_size * d * (1 if cfg.tie_embeddings else 2)
    attention, switch_head, nsa = L * (qo + kv), L * sh, L * sum(nsa_per_layer(cfg))
    total = embedding + attention + ffn + norms + gates + switch_head + nsa
    return ParamCounts(total=total, gates=gates, embedding=embedding, attention=attention,
                       ffn=ffn, norms=norms, switch_head=switch_head, nsa=nsa)


def baseline_config(cfg: ModelConfig) -> ModelConfig:
    """The same model without gates, non-linearity control, SwitchHead, NSA (dense attention)
    or param matching: what param_match matches, so NSA and gated variants all match the
    dense ungated model."""
    return cfg.model_copy(update={"gates": (), "nonlinearity": "none", "switch_head": None,
                                  "nsa": None, "param_match": False})


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


def check_param_match(cfg: ModelConfig) -> None:
    """THE feasibility rule of param_match, run by ModelConfig's validator: every reader of a
    spec (submit, ``validate --no-params``, ``python -m trainer``) refuses the same configs."""
    effective_d_ff(cfg)
