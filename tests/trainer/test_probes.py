"""Probes: first-token attention, max activation, gate scores."""

from __future__ import annotations

import pytest
import torch

from contract import metrics
from contract.config import ModelConfig
from trainer.evaluation import probe_metrics
from trainer.model import GatedLM, build_model
from trainer.probes import ProbeResult, first_token_column, first_token_share

torch.set_num_threads(1)


def test_first_token_share_of_a_hand_built_attention_map() -> None:
    T = 4
    att = torch.zeros(1, 2, T, T)
    # head 0: every query puts 0.5 on key 0 (query 0 must put 1.0 there)
    # head 1: queries 1..3 put 0.1, 0.2, 0.3 on key 0
    for t in range(T):
        att[0, 0, t, 0] = 1.0 if t == 0 else 0.5
        att[0, 1, t, 0] = 1.0 if t == 0 else 0.1 * t
    col = first_token_column(att)
    torch.testing.assert_close(col, torch.tensor([1.0, 0.3, 0.35, 0.4]))
    assert first_token_share(col) == pytest.approx(0.35)  # query 0 skipped


def _zero_qk(model: GatedLM) -> None:
    with torch.no_grad():
        for b in model.blocks:
            b.attn.q_proj.weight.zero_()
            b.attn.k_proj.weight.zero_()


def test_uniform_causal_attention_gives_the_known_share() -> None:
    # q = k = 0 -> every query attends uniformly over its t+1 keys -> mass 1/(t+1) on key 0
    torch.manual_seed(0)
    model = build_model(ModelConfig(preset="tiny"))
    _zero_qk(model)
    T = 10
    pr = model.probe(torch.randint(0, 256, (2, T)))
    expect = sum(1 / (t + 1) for t in range(1, T)) / (T - 1)
    assert pr.first_token_attention == pytest.approx([expect, expect], rel=1e-5)
    assert pr.first_token_attention_mean == pytest.approx(expect, rel=1e-5)


def test_max_activation_is_the_max_abs_of_each_layer_output() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(preset="tiny", n_layer=3))
    idx = torch.randint(0, 256, (2, 12))
    outs: list[torch.Tensor] = []
    hooks = [b.register_forward_hook(lambda _m, _i, o: outs.append(o[0])) for b in model.blocks]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    pr = model.probe(idx)
    assert pr.max_activation == pytest.approx([float(o.abs().max()) for o in outs])
    assert pr.max_activation_mean == pytest.approx(sum(pr.max_activation) / 3)


def test_gate_scores_are_the_first_gates_scores() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(preset="tiny", gates=[
        {"position": "G2", "granularity": "headwise"}, {"position": "G1"}]))
    with torch.no_grad():
        model.blocks[0].attn.gates["G2"].proj.weight.zero_()
    pr = model.probe(torch.randint(0, 256, (2, 8)))
    assert pr.gate_scores[0].shape == (2 * 8 * 2,)  # B*T*Hkv headwise G2 scores
    assert torch.all(pr.gate_scores[0] == 0.5)
    assert pr.gate_score_means[0] == 0.5 and 0.3 < pr.gate_score_means[1] < 0.7
    assert pr.gate_score_mean == pytest.approx((0.5 + pr.gate_score_means[1]) / 2)


def test_ungated_model_has_no_gate_scores_and_metric_names() -> None:
    model = build_model(ModelConfig(preset="tiny"))
    pr = model.probe(torch.randint(0, 256, (1, 6)))
    assert pr.gate_scores == [None, None] and pr.gate_score_mean is None
    m = pr.metrics()
    assert metrics.GATE_SCORE_MEAN not in m
    assert set(m) == {metrics.FIRST_TOKEN_ATTENTION, metrics.MAX_ACTIVATION,
                      *(metrics.per_layer(n, i) for n in (metrics.FIRST_TOKEN_ATTENTION,
                                                         metrics.MAX_ACTIVATION)
                        for i in range(2))}


def test_probe_restores_the_fast_path_and_training_state() -> None:
    model = build_model(ModelConfig(preset="tiny", gates=[{"position": "G1"}]))
    model.train()
    idx = torch.randint(0, 256, (1, 6))
    pr = model.probe(idx)
    assert isinstance(pr, ProbeResult) and model.training
    assert all(b.attn.record is None for b in model.blocks)
    out = model(idx, idx)
    assert out.loss.requires_grad  # probe's no_grad did not leak


def test_probe_metrics_include_gate_means() -> None:
    model = build_model(ModelConfig(preset="tiny", gates=[{"position": "G1"}]))
    m = model.probe(torch.randint(0, 256, (1, 6))).metrics()
    assert metrics.per_layer(metrics.GATE_SCORE_MEAN, 1) in m
    assert 0.0 < m[metrics.GATE_SCORE_MEAN] < 1.0


# ---- NSA's branch weights (part of the gate-score probe) ------------------------------------

NSA = {"compress_block": 4, "compress_stride": 2, "select_block": 4, "select_top_n": 2,
       "window": 6}
BRANCHES = ("compressed", "selected", "window")


def _nsa_model(combine: str, gates: list | None = None) -> GatedLM:
    cfg = ModelConfig.model_validate({"preset": "tiny", "gates": gates or [],
                                      "nsa": {**NSA, "combine": combine}})
    return build_model(cfg, seed=0)


def _branch_names(layer: int | None = None) -> list[str]:
    names = [metrics.nsa_branch_weight(b) for b in BRANCHES]
    return names if layer is None else [metrics.per_layer(n, layer) for n in names]


def test_gated_branch_weights_are_the_gates_mean_in_zero_one() -> None:
    model = _nsa_model("gated")
    with torch.no_grad():  # layer 1's gate at sigmoid(0): exactly 0.5 for every branch
        model.blocks[1].attn.nsa.combine.proj.weight.zero_()
    pr = model.probe(torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(3)))
    m = pr.metrics()
    first = [m[n] for n in _branch_names(0)]
    assert all(0.0 < w < 1.0 for w in first) and len(set(first)) == 3  # input-dependent
    assert [m[n] for n in _branch_names(1)] == [0.5, 0.5, 0.5]
    assert [m[n] for n in _branch_names()] == pytest.approx([(w + 0.5) / 2 for w in first])
    assert pr.gate_score_mean is None  # NSA's branch gate is not a G1..G5 gate


def test_learned_branch_weights_follow_the_learned_logits() -> None:
    model = _nsa_model("learned", gates=[{"position": "G1"}])
    logits = [torch.tensor([[-2.0, 0.0, 1.0]] * 2 + [[0.0, 2.0, -1.0]] * 2),  # (H=4, 3)
              torch.tensor([[3.0, -3.0, 0.5]] * 4)]
    with torch.no_grad():
        for block, logit in zip(model.blocks, logits):
            block.attn.nsa.combine.logit.copy_(logit)
    m = model.probe(torch.randint(0, 256, (1, 16))).metrics()
    want = [torch.sigmoid(lg).mean(dim=0).tolist() for lg in logits]  # mean over heads
    for layer in (0, 1):
        assert [m[n] for n in _branch_names(layer)] == pytest.approx(want[layer], abs=1e-6)
    assert [m[n] for n in _branch_names()] == pytest.approx(
        [(a + b) / 2 for a, b in zip(*want)], abs=1e-6)
    assert 0.0 < m[metrics.GATE_SCORE_MEAN] < 1.0  # the G1 gate keeps its own probe


@pytest.mark.parametrize("combine", ["equal", None])
def test_no_branch_gate_no_branch_weights(combine: str | None) -> None:
    # equal: 1/3 each by construction, not measured; None: dense attention
    model = _nsa_model(combine) if combine else build_model(ModelConfig(preset="tiny"))
    pr = model.probe(torch.randint(0, 256, (1, 16)))
    assert pr.branch_weight_means is None
    assert not any(n.startswith(metrics.NSA_BRANCH_WEIGHT) for n in pr.metrics())


def test_branch_weights_are_logged_with_the_gate_score_probe_only() -> None:
    model = _nsa_model("gated")
    idx = torch.randint(0, 256, (1, 16))
    with_gates, _ = probe_metrics(model, idx, ["gate_scores"], step=0)
    assert set(_branch_names() + _branch_names(0) + _branch_names(1)) == set(with_gates)
    sink_only, _ = probe_metrics(model, idx, ["attention_sink"], step=0)
    assert not any(n.startswith(metrics.NSA_BRANCH_WEIGHT) for n in sink_only)
