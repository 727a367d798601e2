"""GatedLM: interface, fast path vs explicit path, causality, config errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from contract.config import ModelConfig
from trainer.model import GatedLM, ModelOutput, build_model

torch.set_num_threads(1)


def _model(**kw) -> GatedLM:
    torch.manual_seed(0)
    return build_model(ModelConfig(**{"preset": "tiny", **kw}))


def _explicit_logits(model: GatedLM, idx: torch.Tensor) -> torch.Tensor:
    """Logits through the explicit-softmax path (the probe path)."""
    for b in model.blocks:
        b.attn.record = []
    try:
        return model(idx).logits
    finally:
        for b in model.blocks:
            b.attn.record = None


def test_forward_shapes_and_losses() -> None:
    model = _model()
    idx = torch.randint(0, 256, (3, 10))
    out = model(idx)
    assert isinstance(out, ModelOutput) and out.logits.shape == (3, 10, 256)
    assert out.loss is None and out.ce_loss is None and float(out.aux_loss) == 0.0
    tgt = torch.randint(0, 256, (3, 10))
    out = model(idx, tgt)
    expect = F.cross_entropy(out.logits.view(-1, 256), tgt.view(-1))
    torch.testing.assert_close(out.ce_loss, expect)
    torch.testing.assert_close(out.loss, out.ce_loss)
    # near-uniform predictions at init: loss ~ ln(V)
    assert abs(out.loss.item() - torch.log(torch.tensor(256.0)).item()) < 0.1


def test_weights_are_initialised_with_init_std() -> None:
    model = _model(d_model=256, head_dim=64, d_ff=512, init_std=0.05)
    w = model.blocks[0].ffn.up.weight.detach()
    assert abs(float(w.std()) - 0.05) < 0.003 and abs(float(w.mean())) < 0.003
    assert torch.all(model.norm.weight == 1)


def test_tied_and_untied_embeddings() -> None:
    tied, untied = _model(), _model(tie_embeddings=False)
    assert tied.lm_head.weight is tied.embed.weight
    assert untied.lm_head.weight is not untied.embed.weight
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(untied) - n(tied) == 256 * 64


@pytest.mark.parametrize("kw", [{}, {"qk_norm": True},
                                {"gates": [{"position": "G1"}, {"position": "G3"}]},
                                {"gates": [{"position": "G4", "granularity": "headwise"}],
                                 "n_kv_head": 1}])
def test_sdpa_fast_path_equals_explicit_softmax_path(kw: dict) -> None:
    model = _model(**kw)
    idx = torch.randint(0, 256, (2, 24))
    torch.testing.assert_close(model(idx).logits, _explicit_logits(model, idx),
                               rtol=1e-5, atol=1e-5)


def test_normal_forward_does_not_take_the_explicit_path(monkeypatch) -> None:
    import trainer.attention as attention

    def boom(*_a, **_k):
        raise AssertionError("explicit softmax on a normal step")

    monkeypatch.setattr(attention, "explicit_attention", boom)
    _model(gates=[{"position": "G1"}])(torch.randint(0, 256, (1, 8)))


def test_dense_causality() -> None:
    model = _model(qk_norm=True, gates=[{"position": "G1"}])
    idx = torch.randint(0, 256, (2, 20))
    alt = idx.clone()
    alt[:, 15:] = 3
    torch.testing.assert_close(model(idx).logits[:, :15], model(alt).logits[:, :15])


def test_gqa_equals_repeated_kv_heads() -> None:
    """n_kv_head=2 with kv weights == n_kv_head=4 with each kv head's weights repeated."""
    gqa, mha = _model(n_kv_head=2), _model(n_kv_head=4)
    with torch.no_grad():
        for name, p in mha.named_parameters():
            src = dict(gqa.named_parameters())[name]
            if name.endswith(("k_proj.weight", "v_proj.weight")):
                p.copy_(src.view(2, 16, 64).repeat_interleave(2, dim=0).reshape(64, 64))
            else:
                p.copy_(src)
    idx = torch.randint(0, 256, (2, 12))
    torch.testing.assert_close(gqa(idx).logits, mha(idx).logits, rtol=1e-5, atol=1e-5)


def test_backward_reaches_every_parameter() -> None:
    model = _model(qk_norm=True, gates=[{"position": "G1"}, {"position": "G2"},
                                        {"position": "G5"}])
    idx = torch.randint(0, 256, (2, 12))
    model(idx, idx).loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.any()]
    assert missing == []


def test_odd_head_dim_is_rejected_naming_the_field() -> None:
    with pytest.raises(ValueError, match="model.head_dim"):
        build_model(ModelConfig(preset="tiny", head_dim=15))


def test_param_match_is_rejected_for_moe_by_the_config() -> None:
    with pytest.raises(ValueError, match="param_match"):
        ModelConfig(preset="tiny-moe", param_match=True, gates=[{"position": "G1"}])


def test_param_groups_split_decay_once_each() -> None:
    model = _model(gates=[{"position": "G1"}, {"position": "G2", "input_dependent": False}])
    decay, no_decay = model.param_groups(0.1)
    ids = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters())  # each exactly once
    logit = model.blocks[0].attn.gates["G2"].logit
    assert any(p is logit for p in no_decay["params"])
    assert all(p.ndim >= 2 for p in decay["params"]) and decay["weight_decay"] == 0.1
    assert no_decay["weight_decay"] == 0.0


@pytest.mark.parametrize("preset", ["tiny", "tiny-moe"])
def test_bf16_forward_backward_tracks_fp32(preset: str) -> None:
    model = _model(preset=preset, qk_norm=True, gates=[{"position": "G1"}])
    idx = torch.randint(0, 256, (2, 16))
    ref = model(idx, idx)
    half = model.to(torch.bfloat16)
    out = half(idx, idx)
    assert out.logits.dtype == torch.bfloat16 and out.ce_loss.dtype == torch.float32
    assert abs(out.ce_loss.item() - ref.ce_loss.item()) < 0.02
    out.loss.backward()
    assert all(p.grad is not None for p in half.parameters())
