"""Native Sparse Attention's properties (trainer/nsa.py): causality in the whole model for every
combination, the window branch is local attention, the selected branch with every block is
dense causal attention, and the three combinations behave as they say."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from contract.config import ModelConfig
from trainer.model import build_model
from trainer.nsa import NativeSparseAttention
from trainer.nsa_blocks import choose_blocks
from trainer.rope import apply_rope, rope_cache

B, T, H, HKV, D = 2, 32, 4, 2, 16
SMALL = {"compress_block": 4, "compress_stride": 2, "select_block": 4, "select_top_n": 2,
         "window": 6}


def _module(seed: int = 0, **nsa: Any) -> NativeSparseAttention:
    cfg = ModelConfig.model_validate({"preset": "tiny", "nsa": {**SMALL, **nsa}})
    torch.manual_seed(seed)
    return NativeSparseAttention(cfg).double()


def _inputs(seed: int = 1) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, 64, generator=g, dtype=torch.float64)
    q = torch.randn(B, T, H, D, generator=g, dtype=torch.float64)
    k = torch.randn(B, T, HKV, D, generator=g, dtype=torch.float64)
    v = torch.randn(B, T, HKV, D, generator=g, dtype=torch.float64)
    cos, sin = rope_cache(D, T, 10000.0, dtype=torch.float64)
    return x, q, k, v, cos, sin


def _masked_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cos: torch.Tensor,
                      sin: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax attention over ``allowed`` (T, T) keys with RoPE: (B, T, H, D)."""
    qr = apply_rope(q, cos, sin).transpose(1, 2)
    kr = apply_rope(k, cos, sin).transpose(1, 2).repeat_interleave(H // HKV, dim=1)
    att = (qr @ kr.transpose(-2, -1)) / D ** 0.5
    att = att.masked_fill(~allowed, float("-inf")).softmax(-1)
    return (att @ v.transpose(1, 2).repeat_interleave(H // HKV, dim=1)).transpose(1, 2)


# ---- causality ----------------------------------------------------------------------------


@pytest.mark.parametrize("combine", ["gated", "learned", "equal"])
@pytest.mark.parametrize("gates", [[], [{"position": "G1"}]], ids=["ungated", "G1"])
def test_no_output_depends_on_a_later_token(combine: str, gates: list) -> None:
    cfg = ModelConfig.model_validate({"preset": "tiny", "gates": gates,
                                      "nsa": {**SMALL, "combine": combine}})
    model = build_model(cfg, seed=0).double().eval()
    g = torch.Generator().manual_seed(5)
    idx = torch.randint(0, 256, (B, T), generator=g)
    with torch.no_grad():
        before = model(idx).logits
        for t in (0, 3, 4, 9, 17, T - 2):  # inside and at the ends of blocks
            changed = idx.clone()
            changed[:, t + 1:] = torch.randint(0, 256, (B, T - t - 1), generator=g)
            after = model(changed).logits
            torch.testing.assert_close(after[:, :t + 1], before[:, :t + 1], atol=1e-12,
                                       rtol=0)
            assert not torch.allclose(after[:, t + 1:], before[:, t + 1:])


def test_each_query_reads_its_own_block_and_chooses_only_earlier_ones() -> None:
    score = torch.rand(B, HKV, T, T // 4, generator=torch.Generator().manual_seed(0))
    chosen = choose_blocks(score, 4, 3)  # (B, Hkv, T, n_sel)
    own = torch.arange(T) // 4
    assert chosen[..., torch.arange(T), own].all()
    later = torch.arange(T // 4)[None, :] > own[:, None]
    assert not (chosen & later).any()
    assert (chosen.sum(-1) == (own + 1).clamp(max=3)).all()  # top-n, or all there are


def test_a_query_before_the_first_whole_block_reads_no_compressed_key() -> None:
    module = _module()
    _, q, k, v, _, _ = _inputs()
    o, p = module.compressed(q, k, v)
    assert p.shape == (B, H, T, (T - 4) // 2 + 1)
    assert torch.equal(o[:, :, :3], torch.zeros_like(o[:, :, :3]))  # tokens 0-2: no block
    assert torch.allclose(p[:, :, 3:].sum(-1), torch.ones(1, dtype=p.dtype))


# ---- the branches against plain attention ---------------------------------------------------


@pytest.mark.parametrize("window", [1, 6, T])
def test_the_window_branch_is_local_attention(window: int) -> None:
    module = _module(window=window)
    _, q, k, v, cos, sin = _inputs()
    t = torch.arange(T)
    local = (t[:, None] >= t[None, :]) & (t[:, None] - t[None, :] < window)
    with torch.no_grad():
        out, _ = module.branches(q, k, v, cos, sin)
    torch.testing.assert_close(out[:, :, :, 2], _masked_reference(q, k, v, cos, sin, local))
    if window == T:  # a window of the whole context is dense causal attention
        dense = F.scaled_dot_product_attention(
            apply_rope(q, cos, sin).transpose(1, 2), apply_rope(k, cos, sin).transpose(1, 2),
            v.transpose(1, 2), is_causal=True, enable_gqa=True).transpose(1, 2)
        torch.testing.assert_close(out[:, :, :, 2], dense)


@pytest.mark.parametrize("select_block", [2, 4, 8])
def test_selecting_every_block_is_dense_causal_attention(select_block: int) -> None:
    module = _module(select_block=select_block, select_top_n=T // select_block)
    _, q, k, v, cos, sin = _inputs()
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        out, _ = module.branches(q, k, v, cos, sin)
    torch.testing.assert_close(out[:, :, :, 1], _masked_reference(q, k, v, cos, sin, causal))


def test_fewer_blocks_make_the_selected_branch_sparse() -> None:
    """The identity above is no accident of the masks: with top-2 of 8 the branch differs."""
    module = _module()
    _, q, k, v, cos, sin = _inputs()
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    with torch.no_grad():
        out, att = module.branches(q, k, v, cos, sin, weights=True)
    assert not torch.allclose(out[:, :, :, 1], _masked_reference(q, k, v, cos, sin, causal))
    assert att is not None and (att[..., T - 1, :] > 0).sum(-1).max() <= 2 * 4


# ---- the combinations -----------------------------------------------------------------------


def test_equal_is_the_mean_of_the_branches() -> None:
    module = _module(combine="equal")
    assert not list(module.combine.parameters())
    x, q, k, v, cos, sin = _inputs()
    with torch.no_grad():
        y, _ = module(x, q, k, v, cos, sin)
        out, _ = module.branches(q, k, v, cos, sin)
    torch.testing.assert_close(y, out.mean(dim=3))


def test_gated_weights_are_in_0_1_and_read_the_input() -> None:
    module = _module(combine="gated")
    x, q, k, v, cos, sin = _inputs()
    with torch.no_grad():
        module.combine.proj.weight.mul_(20)  # spread the sigmoids towards 0 and 1
        w = module.combine(x)
        w2 = module.combine(x.flip(1))
        y, _ = module(x, q, k, v, cos, sin)
        out, _ = module.branches(q, k, v, cos, sin)
    assert w.shape == (B, T, H, 3)
    assert ((w > 0) & (w < 1)).all() and w.min() < 0.05 and w.max() > 0.95
    assert not torch.allclose(w, w2)  # depends on the token
    torch.testing.assert_close(y, (out * w.unsqueeze(-1)).sum(3))


def test_learned_weights_are_per_head_and_ignore_the_input() -> None:
    module = _module(combine="learned")
    x, _, _, _, _, _ = _inputs()
    with torch.no_grad():
        assert torch.equal(module.combine(x), torch.full((1, 1, H, 3), 0.5, dtype=x.dtype))
        module.combine.logit.copy_(torch.randn(H, 3, dtype=x.dtype))
        w = module.combine(x)
    assert w.shape == (1, 1, H, 3) and ((w > 0) & (w < 1)).all()
    assert torch.equal(w, module.combine(torch.randn_like(x)))


@pytest.mark.parametrize("combine", ["gated", "learned", "equal"])
def test_every_nsa_parameter_acts_and_learns(combine: str) -> None:
    """Moving each NSA parameter changes the logits, and training gives each a gradient."""
    cfg = ModelConfig.model_validate({"preset": "tiny", "nsa": {**SMALL, "combine": combine}})
    model = build_model(cfg, seed=0)
    idx = torch.randint(0, 256, (B, T), generator=torch.Generator().manual_seed(1))
    model(idx, idx).loss.backward()
    nsa = {n: p for n, p in model.named_parameters() if ".nsa." in n}
    assert len(nsa) == 2 * (2 + (combine != "equal"))
    for name, p in nsa.items():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        with torch.no_grad():
            before = model(idx).logits
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
            assert not torch.allclose(before, model(idx).logits, atol=1e-6), name


def test_the_attention_sink_probe_reads_the_selected_branch() -> None:
    cfg = ModelConfig.model_validate({"preset": "tiny", "nsa": SMALL})
    probes = build_model(cfg, seed=0).probe(torch.randint(0, 256, (B, T)))
    assert len(probes.first_token_attention) == 2
    assert all(0 < f < 1 for f in probes.first_token_attention)
