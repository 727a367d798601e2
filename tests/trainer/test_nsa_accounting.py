"""Native Sparse Attention's parameters and FLOPs: contract/params.py and contract/flops.py
against the built module (its tensors, and torch's FlopCounterMode over a training step), and
param_match putting every NSA and gated variant at the dense ungated model's total."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from contract.config import ModelConfig
from contract.flops import flops_per_token
from contract.params import D_FF_MULTIPLE, count_params
from trainer.meta_params import meta_count
from trainer.model import build_model

G1 = {"position": "G1"}


def _cfg(**over: Any) -> ModelConfig:
    return ModelConfig.model_validate({"preset": "tiny", **over})


@pytest.mark.parametrize("combine, gate", [("gated", 64 * 4 * 3), ("learned", 4 * 3),
                                           ("equal", 0)])
def test_nsa_parameters_are_the_modules_tensors(combine: str, gate: int) -> None:
    cfg = _cfg(nsa={"combine": combine})  # compress_block 16, head_dim 16, 2 layers
    model = build_model(cfg)
    built = sum(p.numel() for b in model.layers() for p in b.attn.nsa.parameters())
    counts = count_params(cfg)
    assert counts.nsa == built == 2 * (2 * 16 * 16 * 16 + gate)
    assert counts.total == sum(p.numel() for p in model.parameters())
    assert counts == meta_count(cfg) == meta_count(cfg, device="cpu")
    assert counts.total - count_params(_cfg()).total == counts.nsa  # nothing else moves


def test_param_match_puts_every_cell_at_the_dense_ungated_total() -> None:
    """The 2x2 (dense / NSA x ungated / G1) and the branch gates, all param_match: each total
    is the dense ungated model's to within the rounding of d_ff to a multiple of 8."""
    base = count_params(_cfg()).total
    unit = 3 * 64 * 2  # parameters per d_ff unit (SwiGLU: 3 matrices, 2 layers)
    cells = [{"gates": [G1]}, {"nsa": {"combine": "equal"}},
             {"nsa": {"combine": "equal"}, "gates": [G1]}, {"nsa": {"combine": "gated"}},
             {"nsa": {"combine": "learned"}}, {"nsa": {"combine": "gated"}, "gates": [G1]}]
    for over in cells:
        cfg = _cfg(param_match=True, **over)
        model = build_model(cfg, device="meta")
        assert model.d_ff < 176 and model.d_ff % D_FF_MULTIPLE == 0, over
        assert abs(count_params(cfg).total - base) <= D_FF_MULTIPLE // 2 * unit, over
        assert count_params(cfg) == meta_count(cfg), over
    gated = count_params(_cfg(param_match=True, nsa={}, gates=[G1])).total
    ungated = count_params(_cfg(param_match=True, nsa={})).total
    assert abs(gated - ungated) <= D_FF_MULTIPLE * unit


@pytest.mark.parametrize("combine", ["gated", "equal"])
def test_flops_match_a_training_step_of_the_built_model(combine: str) -> None:
    """FlopCounterMode sees 6 N per token of matmuls, the compression maps, the compressed
    branch's score products (q.ck and p.cv, explicit matmuls), and the block scoring (p_cmp x
    shares, forward only); the two token branches run in SDPA, which torch may or may not
    count, as dense (the CPU path masks, it does not skip)."""
    cfg = _cfg(nsa={"combine": combine})
    B, T = 2, 32
    net = build_model(cfg)
    idx = torch.randint(0, cfg.vocab_size, (B, T))
    with FlopCounterMode(display=False) as counter:
        net(idx, idx).loss.backward()
    ours = flops_per_token(cfg, T)
    L, H, D, n_cmp, n_sel = 2, 4, 16, 3, 2  # (32 - 16) // 8 + 1 compressed, 32 / 16 selection
    compressed = 6 * 2 * L * n_cmp * H * D * B * T  # part of ours.attention
    scoring = 2 * L * B * H * T * n_cmp * n_sel
    dense_sdpa = 2 * 6 * 2 * L * T * H * D * B * T  # two masked-dense branches
    rest = counter.get_total_flops() - (6 * ours.matmul_params + ours.compression) * B * T
    assert rest - compressed - scoring in (0, dense_sdpa)
    assert ours.compression == 6 * L * (2 * 16 * 16 * 16) * 2 * n_cmp // T


def test_nsa_reads_fewer_keys_than_dense_at_the_study_context() -> None:
    """At sweeps/nsa.yaml's context the attention term is a fraction of dense's."""
    T = 192
    nsa = flops_per_token(_cfg(nsa={}), T)
    dense = flops_per_token(_cfg(), T)
    keys = (T - 16) // 8 + 1 + 4 * 16 + 32  # 23 compressed, 64 selected, 32 window
    assert nsa.attention == dense.attention * keys // T
    assert nsa.attention < 0.7 * dense.attention
