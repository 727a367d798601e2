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


def test_nsa_by_hand() -> None:
    """NSA at 192 tokens (compress 16 / stride 8, select 4 x 16, window 32): a query's score
    products read 23 + 64 + 32 keys, not 192; the branch gate is a matmul per token; the
    compression maps run once per compressed block and kv head."""
    nsa = {"compress_block": 16, "compress_stride": 8, "select_block": 16, "select_top_n": 4,
           "window": 32}
    f = flops_per_token(_cfg(nsa={**nsa, "combine": "gated"}), 192)
    dense = flops_per_token(_cfg(), 192)
    assert f.attention == 6 * 2 * 2 * (23 + 64 + 32) * 4 * 16  # L 2, H 4, D 16
    assert f.matmul_params == dense.matmul_params + 2 * 64 * 4 * 3  # the gate, d -> H x 3
    # 2 layers x (k and v maps of 16 tokens x 16 -> 16) x 2 kv heads x 23 blocks / 192 tokens
    assert f.compression == 6 * 2 * (2 * 256 * 16) * 2 * 23 // 192 == 23_552
    assert f.total == 6 * f.matmul_params + f.attention + f.compression
    equal = flops_per_token(_cfg(nsa={**nsa, "combine": "equal"}), 192)
    learned = flops_per_token(_cfg(nsa={**nsa, "combine": "learned"}), 192)
    assert equal.matmul_params == learned.matmul_params == dense.matmul_params
    # shorter than a compressed block: no compressed key; everything capped at the context
    short = flops_per_token(_cfg(nsa={**nsa, "combine": "equal"}), 8)
    assert short.compression == 0 and short.attention == 6 * 2 * 2 * (0 + 8 + 8) * 4 * 16
