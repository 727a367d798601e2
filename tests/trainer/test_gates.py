"""The gate maths: every position, granularity, sharing, combine and activation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from contract.config import GateSpec, ModelConfig
from trainer.gates import Gate, ns_sigmoid
from trainer.model import GatedLM, build_model

torch.set_num_threads(1)


def _cfg(gates: list[dict] = (), **kw) -> ModelConfig:
    base = dict(preset="tiny", qk_norm=False, vocab_size=64, n_layer=1)
    return ModelConfig(**{**base, **kw, "gates": list(gates)})


def _pair(gates: list[dict], zero_gates: bool = True, gated_kw: dict | None = None,
          **kw) -> tuple[GatedLM, GatedLM]:
    """(ungated, gated) models sharing every non-gate weight; gate weights zeroed.

    ``gated_kw``: extra config for the second model only (e.g. a non-linearity control).
    """
    torch.manual_seed(0)
    base = build_model(_cfg([], **kw))
    gated = build_model(_cfg(gates, **kw, **(gated_kw or {})))
    src = base.state_dict()
    with torch.no_grad():
        for name, p in gated.named_parameters():
            if name in src and src[name].shape == p.shape:
                p.copy_(src[name])
            elif name.endswith("q_proj.weight"):  # fused G1 rows after the q rows
                n = src[name].shape[0]
                p[:n].copy_(src[name])
                if zero_gates:
                    p[n:].zero_()
            elif zero_gates and ".gates." in name:
                p.zero_()
    return base, gated


def _x(B: int = 2, T: int = 12, C: int = 64, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, C, generator=g)


def _attn(model: GatedLM, x: torch.Tensor) -> torch.Tensor:
    cos, sin = model._rope_tables(x.shape[1], x.device)
    return model.blocks[0].attn(x, cos, sin)


@pytest.mark.parametrize("position", ["G1", "G2", "G5"])
def test_zeroed_sigmoid_gate_halves_the_attention_output(position: str) -> None:
    # G1 halves the SDPA output; attention and o_proj are linear in v, so G2/G5 also halve it
    base, gated = _pair([{"position": position}])
    x = _x()
    torch.testing.assert_close(_attn(gated, x), 0.5 * _attn(base, x), rtol=1e-5, atol=1e-6)


def test_g1_halves_exactly_the_per_head_sdpa_output() -> None:
    base, gated = _pair([{"position": "G1"}])
    seen: dict[str, torch.Tensor] = {}
    for name, m in (("base", base), ("gated", gated)):
        m.blocks[0].attn.o_proj.register_forward_hook(
            lambda _m, inp, _o, name=name: seen.__setitem__(name, inp[0]))
        _attn(m, _x())
    torch.testing.assert_close(seen["gated"], 0.5 * seen["base"])


def _pattern(shape: tuple[int, ...], seed: int = 3) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) + 0.25


@pytest.mark.parametrize("position", ["G1", "G2", "G3", "G4", "G5"])
def test_each_position_scales_exactly_its_tensor(position: str) -> None:
    """A constant identity gate with pattern P == the ungated model with that tensor's
    producing weights scaled by P: proves which tensor each position gates."""
    spec = {"position": position, "activation": "identity", "input_dependent": False}
    base, gated = _pair([spec], zero_gates=False)
    a, b = gated.blocks[0].attn, base.blocks[0].attn
    pat = _pattern(tuple(a.gates[position].logit.shape))
    with torch.no_grad():
        a.gates[position].logit.copy_(pat)
        flat = pat.reshape(-1, 1)  # one scale per output row of the producing projection
        if position == "G1":
            b.o_proj.weight.mul_(flat.T)  # G1 scales o_proj's input channels
        else:
            layer = {"G2": b.v_proj, "G3": b.k_proj, "G4": b.q_proj, "G5": b.o_proj}[position]
            layer.weight.mul_(flat)
    x = _x()
    torch.testing.assert_close(_attn(gated, x), _attn(base, x), rtol=1e-5, atol=1e-6)


def test_fused_g1_projection_equals_an_unfused_reference() -> None:
    torch.manual_seed(0)
    model = build_model(_cfg([{"position": "G1"}], n_kv_head=4))
    attn = model.blocks[0].attn
    x = _x()
    B, T, _ = x.shape
    H, D = attn.n_head, attn.head_dim
    wq, wg = attn.q_proj.weight.split([H * D, H * D])
    cos, sin = model._rope_tables(T, x.device)
    from trainer.rope import apply_rope

    def heads(w: torch.Tensor) -> torch.Tensor:
        return F.linear(x, w).view(B, T, H, D)

    q = apply_rope(heads(wq), cos, sin).transpose(1, 2)
    k = apply_rope(heads(attn.k_proj.weight), cos, sin).transpose(1, 2)
    v = heads(attn.v_proj.weight).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
    y = y * torch.sigmoid(F.linear(x, wg)).view(B, T, H, D)  # separate gate GEMM
    ref = F.linear(y.reshape(B, T, H * D), attn.o_proj.weight)
    torch.testing.assert_close(_attn(model, x), ref, rtol=1e-5, atol=1e-6)


def test_headwise_equals_elementwise_with_a_constant_per_head_score() -> None:
    H, D, C = 4, 16, 64
    head = Gate(GateSpec(granularity="headwise"), H, D, C, 0.02)
    elem = Gate(GateSpec(granularity="elementwise"), H, D, C, 0.02)
    with torch.no_grad():  # each head's row repeated over its D channels
        elem.proj.weight.copy_(head.proj.weight.repeat_interleave(D, dim=0))
    x, y = _x(), torch.randn(2, 12, H, D)
    torch.testing.assert_close(head(y, x)[0], elem(y, x)[0])
    assert head.scores(x).shape == (2, 12, H, 1)


def test_head_shared_is_the_mean_of_the_per_head_scores() -> None:
    H, D, C = 4, 16, 64
    shared = Gate(GateSpec(sharing="head_shared"), H, D, C, 0.5)
    x = _x()
    per_head = torch.sigmoid(F.linear(x, shared.proj.weight)).view(2, 12, H, D)
    s = shared.scores(x)
    assert s.shape == (2, 12, 1, D)
    torch.testing.assert_close(s, per_head.mean(dim=2, keepdim=True))
    assert not torch.allclose(per_head[:, :, 0], per_head[:, :, 1])  # a real average
    assert sum(p.numel() for p in shared.parameters()) == C * H * D  # = head-specific params


def test_ns_sigmoid_lies_in_half_to_one() -> None:
    z = torch.linspace(-80, 80, 1001)
    s = ns_sigmoid(z)
    assert s.min() >= 0.5 and s.max() <= 1.0
    assert s[0] == 0.5 and s[-1] == 1.0 and ns_sigmoid(torch.zeros(1)) == 0.75


@pytest.mark.parametrize("activation", ["identity", "silu"])
def test_additive_zero_gate_equals_ungated(activation: str) -> None:
    # identity(0) = silu(0) = 0, so Y + act(X*0) == Y
    base, gated = _pair([{"position": "G1", "combine": "additive", "activation": activation}])
    idx = torch.randint(0, 64, (2, 12))
    torch.testing.assert_close(gated(idx).logits, base(idx).logits)


@pytest.mark.parametrize("activation,value", [("sigmoid", 0.5), ("ns_sigmoid", 0.75),
                                              ("silu", 0.0), ("identity", 0.0)])
def test_multiplicative_zero_gate_scales_by_act_of_zero(activation: str, value: float) -> None:
    base, gated = _pair([{"position": "G2", "activation": activation}])
    x = _x()
    torch.testing.assert_close(_attn(gated, x), value * _attn(base, x), rtol=1e-5, atol=1e-6)


def test_input_independent_gate_is_a_zero_initialised_parameter() -> None:
    model = build_model(_cfg([{"position": "G1", "input_dependent": False},
                              {"position": "G2", "granularity": "headwise",
                               "input_dependent": False}]))
    gates = model.blocks[0].attn.gates
    assert gates["G1"].logit.shape == (4, 16) and gates["G2"].logit.shape == (2, 1)
    assert torch.count_nonzero(gates["G1"].logit) == 0
    assert model.blocks[0].attn.g1_width == 0  # nothing fused into q_proj
    probe = model.probe(torch.randint(0, 64, (1, 8)))
    assert torch.all(probe.gate_scores[0] == 0.5)


GATE_VARIANTS = [
    [{"position": p}] for p in ("G1", "G2", "G3", "G4", "G5")
] + [
    [{"position": "G1", "granularity": "headwise"}],
    [{"position": "G2", "sharing": "head_shared"}],
    [{"position": "G1", "combine": "additive", "activation": "silu"}],
    [{"position": "G1"}, {"position": "G2"}],
]


@pytest.mark.parametrize("gates", GATE_VARIANTS, ids=lambda g: "+".join(
    GateSpec(**s).label for s in g))
def test_causality_for_every_gate(gates: list[dict]) -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(gates, n_layer=2, qk_norm=True))
    idx = torch.randint(0, 64, (2, 16))
    changed = idx.clone()
    changed[:, 9:] = (changed[:, 9:] + 7) % 64
    a, b = model(idx).logits, model(changed).logits
    torch.testing.assert_close(a[:, :9], b[:, :9])
    assert not torch.allclose(a[:, 9:], b[:, 9:])


@pytest.mark.parametrize("nonlinearity", ["rmsnorm", "silu"])
def test_nonlinearity_controls_act_on_the_sdpa_output(nonlinearity: str) -> None:
    base, ctl = _pair([], gated_kw={"nonlinearity": nonlinearity})
    seen: dict[str, torch.Tensor] = {}
    base.blocks[0].attn.o_proj.register_forward_hook(lambda _m, i, _o: seen.update(b=i[0]))
    ctl.blocks[0].attn.o_proj.register_forward_hook(lambda _m, i, _o: seen.update(c=i[0]))
    x = _x()
    _attn(base, x), _attn(ctl, x)
    y = seen["b"].view(2, 12, 4, 16)
    if nonlinearity == "silu":
        expect = F.silu(y)
    else:  # per-head RMSNorm, weight 1 (unit RMS per head and token)
        expect = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + ctl.cfg.norm_eps)
        rms = seen["c"].view(2, 12, 4, 16).pow(2).mean(-1).sqrt()
        assert rms.min() > 0.9 and rms.max() <= 1.0 + 1e-5
    torch.testing.assert_close(seen["c"].view(2, 12, 4, 16), expect, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("granularity, fused", [("elementwise", True), ("headwise", False)])
def test_g1_is_fused_into_q_proj_only_when_the_width_stays_aligned(granularity, fused):
    # `small`: 6 heads of 64. Elementwise adds 384 columns (aligned), headwise 6 (390: misaligned,
    # +7.5 % step time on an H200), so headwise keeps its own projection. Same parameter count.
    cfg = ModelConfig(preset="small", gates=[{"position": "G1", "granularity": granularity}])
    attn = build_model(cfg).blocks[0].attn
    gate = attn.gates["G1"]
    assert gate.fused is fused and (gate.proj is None) is fused
    assert attn.q_proj.out_features == 384 + (gate.width if fused else 0)
    assert attn.q_proj.out_features % 8 == 0
    plain = build_model(ModelConfig(preset="small"))
    added = sum(p.numel() for p in build_model(cfg).parameters()) - \
        sum(p.numel() for p in plain.parameters())
    assert added == 6 * 384 * gate.width
