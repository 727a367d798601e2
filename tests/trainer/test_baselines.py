"""The paper's baselines: sandwich norm, residual clipping, SwitchHead attention."""

from __future__ import annotations

import pytest
import torch

from contract.config import ModelConfig
from trainer.model import build_model
from trainer.switch_head import SwitchProjection

torch.set_num_threads(1)


def _model(**kw):
    torch.manual_seed(0)
    return build_model(ModelConfig(**{"preset": "tiny", **kw}))


def test_sandwich_norm_output_has_unit_rms_times_its_weight() -> None:
    # tiny eps: attention outputs at init have mean squares ~1e-5, where eps=1e-6 would show
    model = _model(norm_style="sandwich", norm_eps=1e-12)
    seen: list[torch.Tensor] = []
    block = model.blocks[0]
    with torch.no_grad():
        block.attn_post_norm.weight.fill_(3.0)
        block.ffn_post_norm.weight.fill_(0.5)
    block.attn_post_norm.register_forward_hook(lambda _m, _i, o: seen.append(o))
    block.ffn_post_norm.register_forward_hook(lambda _m, _i, o: seen.append(o))
    model(torch.randint(0, 256, (2, 10)))
    rms = [s.pow(2).mean(-1).sqrt() for s in seen]
    torch.testing.assert_close(rms[0], torch.full_like(rms[0], 3.0), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rms[1], torch.full_like(rms[1], 0.5), rtol=1e-4, atol=1e-4)


def test_sandwich_residual_adds_the_normed_output() -> None:
    model = _model(norm_style="sandwich", n_layer=1)
    block = model.blocks[0]
    h = torch.randn(2, 6, 64)
    cos, sin = model._rope_tables(6, h.device)
    with torch.no_grad():
        a = block.attn_post_norm(block.attn(block.attn_norm(h), cos, sin))
        mid = h + a
        expect = mid + block.ffn_post_norm(block.ffn(block.ffn_norm(mid)))
        out, _ = block(h, cos, sin)
    torch.testing.assert_close(out, expect)


def test_clipping_bounds_the_sublayer_outputs_and_counts_exactly() -> None:
    c = 0.01
    model = _model(clip_residual=c)
    raw: list[torch.Tensor] = []
    for b in model.blocks:  # the unclipped sub-layer outputs
        b.attn.register_forward_hook(lambda _m, _i, o: raw.append(o.detach()))
        b.ffn.register_forward_hook(lambda _m, _i, o: raw.append(o.detach()))
    block = model.blocks[0]
    h = torch.randn(2, 6, 64)
    cos, sin = model._rope_tables(6, h.device)
    out, _ = block(h, cos, sin)  # a training forward: counted
    torch.testing.assert_close(out.detach(), h + raw[0].clamp(-c, c) + raw[1].clamp(-c, c))
    clipped = sum(int((r.abs() > c).sum()) for r in raw)
    assert 0 < clipped < sum(r.numel() for r in raw)
    assert model.clip_rate() == pytest.approx(clipped / sum(r.numel() for r in raw))
    assert model.clip_rate() == 0.0  # reset by the previous call


def test_clip_rate_over_several_forwards_and_off_by_default() -> None:
    model = _model(clip_residual=1e-3)
    idx = torch.randint(0, 256, (1, 8))
    model(idx), model(idx)
    rate = model.clip_rate()
    assert 0.0 < rate <= 1.0
    plain = _model()
    plain(idx)
    assert plain.clip_rate() == 0.0


def test_clip_rate_ignores_eval_and_probe_passes() -> None:
    model = _model(clip_residual=1e-3)
    idx = torch.randint(0, 256, (1, 8))
    model.probe(idx)  # training mode, no grad
    model.eval()
    model(idx)  # eval mode
    assert model.clip_rate() == 0.0
    model.train()
    model(idx)
    assert model.clip_rate() > 0.0


def test_switch_head_e1_k1_equals_a_headwise_value_gate() -> None:
    sw = _model(switch_head={"targets": "v", "n_experts": 1, "top_k": 1}, n_layer=1)
    gated = _model(gates=[{"position": "G2", "granularity": "headwise"}], n_layer=1)
    with torch.no_grad():
        for name, p in gated.named_parameters():
            if name.endswith("v_proj.weight"):
                proj = sw.blocks[0].attn.v_proj
                p.copy_(proj.weight.reshape(2 * 16, 64))  # (H, 1, D, C) -> (H*D, C)
            elif name.endswith("gates.G2.proj.weight"):
                p.copy_(sw.blocks[0].attn.v_proj.router.weight)
            else:
                p.copy_(dict(sw.named_parameters())[name])
    idx = torch.randint(0, 256, (2, 10))
    torch.testing.assert_close(sw(idx).logits, gated(idx).logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("targets,e,k", [("kv", 8, 8), ("kv", 4, 4), ("v", 4, 4),
                                         ("v", 8, 2), ("v", 1, 1)])
def test_table6_configs_run_and_select_k_experts(targets: str, e: int, k: int) -> None:
    model = _model(switch_head={"targets": targets, "n_experts": e, "top_k": k})
    attn = model.blocks[0].attn
    projs = [attn.v_proj] + ([attn.k_proj] if targets == "kv" else [])
    assert all(isinstance(p, SwitchProjection) for p in projs)
    assert targets == "kv" or not isinstance(attn.k_proj, SwitchProjection)
    seen: dict[int, torch.Tensor] = {}  # what each projection was given in the forward pass

    def keep_input(m: torch.nn.Module, i: tuple[torch.Tensor], _o: torch.Tensor) -> None:
        seen[id(m)] = i[0].detach()

    for p in projs:
        p.register_forward_hook(keep_input)
    idx = torch.randint(0, 256, (2, 10))
    model(idx, idx).loss.backward()
    for p in projs:
        sel = p.routing(seen[id(p)]) != 0  # (B, T, H, E): the kept experts' (non-zero) scores
        assert sel.shape == (2, 10, 2, e) and torch.all(sel.sum(-1) == k)


def test_gradients_reach_exactly_the_selected_experts() -> None:
    torch.manual_seed(0)
    proj = SwitchProjection(d_model=16, n_heads=2, head_dim=4, n_experts=8, top_k=2,
                            init_std=0.5)
    x = torch.randn(1, 2, 16)  # 2 tokens x 2 heads x top-2: at most 4 experts per head
    proj(x).sum().backward()
    kept = proj.routing(x) != 0  # (B, T, H, E): the kept experts' (non-zero) scores
    used = kept.any(dim=(0, 1))  # (H, E)
    got = proj.weight.grad.abs().sum(dim=(-1, -2)) > 0  # (H, E)
    assert torch.equal(got, used) and not used.all()
    # routing: each token-head picks the k largest sigmoid scores
    scores = torch.sigmoid(proj.router(x)).view(1, 2, 2, 8)
    top = scores.topk(2, dim=-1).indices
    assert torch.equal(kept, torch.zeros_like(kept).scatter_(-1, top, True))


def test_switch_head_params() -> None:
    from contract.params import added_params, count_params

    cfg = ModelConfig(preset="tiny", switch_head={"targets": "kv", "n_experts": 4, "top_k": 2})
    per_target = 3 * 2 * 16 * 64 + 64 * 2 * 4  # (E-1) extra experts + router
    assert added_params(cfg) == 2 * 2 * per_target  # 2 layers x 2 targets
    assert count_params(cfg).switch_head == 2 * 2 * (4 * 2 * 16 * 64 + 64 * 2 * 4)
