"""contract/flops.py: training FLOPs per token, hand-computed for the tiny presets."""

from __future__ import annotations

import pytest

from contract.config import ModelConfig
from contract.flops import flops_per_token


def _cfg(**kw: object) -> ModelConfig:
    return ModelConfig.model_validate({"preset": "tiny", **kw})


def test_tiny_dense_by_hand() -> None:
    # tiny: L 2, d 64, 4 q heads / 2 kv heads of 16, d_ff 176, vocab 256 (tied)
    attn = 2 * (2 * 64 * 64 + 2 * 64 * 32)  # q, o; k, v
    ffn = 2 * 3 * 64 * 176
    head = 256 * 64  # the LM head multiplies once per token; the lookup is free
    f = flops_per_token(_cfg(), 128)
    assert f.matmul_params == attn + ffn + head == 108_544
    assert f.attention == 6 * 2 * 2 * 128 * 4 * 16  # QK^T and AV, forward + backward
    assert f.total == 6 * 108_544 + 196_608 and f.gates == 0


def test_gates_cost_their_projection() -> None:
    g1 = flops_per_token(_cfg(gates=[{"position": "G1"}]), 128)
    assert g1.gates == 6 * 2 * 64 * 64  # d_model x (4 heads x 16) per layer
    assert g1.total - flops_per_token(_cfg(), 128).total == g1.gates
    head = flops_per_token(_cfg(gates=[{"position": "G1", "granularity": "headwise"}]), 128)
    assert head.gates == 6 * 2 * 64 * 4


def test_moe_counts_the_routed_experts_only() -> None:
    moe = flops_per_token(ModelConfig.model_validate({"preset": "tiny-moe"}), 128)
    # 4 experts of d_expert 64, top 2: per layer 2 x 3 x 64 x 64 + the router 64 x 4
    ffn = 2 * (2 * 3 * 64 * 64 + 64 * 4)
    assert moe.matmul_params == 2 * (2 * 64 * 64 + 2 * 64 * 32) + ffn + 256 * 64


def test_seq_len_must_be_positive() -> None:
    with pytest.raises(ValueError, match="seq_len"):
        flops_per_token(_cfg(), 0)
