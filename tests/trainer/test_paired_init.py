"""Paired initialisation (trainer/initialise.py): at one seed, a baseline and any variant start
every weight they share bit for bit equal; model.init: legacy reproduces the old draws."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
import torch

from contract.config import ModelConfig
from trainer.initialise import RULES, initialise_paired, rule
from trainer.model import build_model
from trainer.train import seed_everything

G1 = {"position": "G1"}
# One model of every variant family of the paper's tables (sweeps/paper, sweeps/gates.yaml,
# sweeps/baselines.yaml), as overrides of the dense `tiny` baseline.
DENSE_FAMILIES: dict[str, dict[str, Any]] = {
    **{f"{p}_elementwise": {"gates": [{"position": p}]} for p in ("G1", "G2", "G3", "G4", "G5")},
    "G1_headwise": {"gates": [{**G1, "granularity": "headwise"}]},  # unfused (4 columns)
    "G2_headwise": {"gates": [{"position": "G2", "granularity": "headwise"}]},
    "G1_head_shared": {"gates": [{**G1, "sharing": "head_shared"}]},
    "G2_head_shared": {"gates": [{"position": "G2", "sharing": "head_shared"}]},
    "G1_additive_silu": {"gates": [{**G1, "combine": "additive", "activation": "silu"}]},
    "G1_additive_identity": {"gates": [{**G1, "combine": "additive",
                                        "activation": "identity"}]},
    "G1_silu": {"gates": [{**G1, "activation": "silu"}]},
    "G1_ns_sigmoid": {"gates": [{**G1, "activation": "ns_sigmoid"}]},
    "G1_input_independent": {"gates": [{**G1, "input_dependent": False}]},
    "G1_G2": {"gates": [G1, {"position": "G2"}]},
    "nonlinearity_rmsnorm": {"nonlinearity": "rmsnorm"},
    "nonlinearity_silu": {"nonlinearity": "silu"},
    "kv_heads_x2": {"n_kv_head": 4},
    "q_heads_x2": {"n_head": 8},
    "param_matched_G1": {"gates": [G1], "param_match": True},
    "sandwich_norm": {"norm_style": "sandwich"},
    "clip_residual": {"clip_residual": 1.0},
    "qk_norm": {"qk_norm": True},
    "untied": {"tie_embeddings": False},
    "switch_kv_4top4": {"switch_head": {"targets": "kv", "n_experts": 4, "top_k": 4}},
    "switch_v_8top2": {"switch_head": {"targets": "v", "n_experts": 8, "top_k": 2}},
    "switch_v_1top1": {"switch_head": {"targets": "v", "n_experts": 1, "top_k": 1}},
    "nsa_gated": {"nsa": {"combine": "gated"}},
    "nsa_learned": {"nsa": {"combine": "learned"}},
    "nsa_equal_G1": {"nsa": {"combine": "equal"}, "gates": [G1]},
}
MOE_FAMILIES: dict[str, dict[str, Any]] = {
    "moe_G1": {"gates": [G1]},
    "moe_add_experts": {"moe": {"n_experts": 6, "top_k": 2, "d_expert": 64}},
    "moe_kv_heads_x2": {"n_kv_head": 4},
}


def _model(seed: int = 0, preset: str = "tiny", **over: Any) -> torch.nn.Module:
    return build_model(ModelConfig.model_validate({"preset": preset, **over}), seed=seed)


def _params(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach() for n, p in model.named_parameters()}


def _shared_equal(base: dict[str, torch.Tensor], other: dict[str, torch.Tensor]) -> list[str]:
    """Names of the baseline's weights that the other model shares (same name and shape);
    fails on the first that differs."""
    shared = [n for n, t in base.items() if n in other and other[n].shape == t.shape]
    for n in shared:
        assert torch.equal(base[n], other[n]), f"{n} differs"
    return shared


@pytest.mark.parametrize("family", sorted(DENSE_FAMILIES))
def test_every_shared_weight_equals_the_baselines(family: str) -> None:
    base = _params(_model(7))
    other = _params(_model(7, **DENSE_FAMILIES[family]))
    shared = _shared_equal(base, other)
    assert {"embed.weight", "norm.weight", "blocks.1.attn_norm.weight"} <= set(shared)
    if family in ("kv_heads_x2", "q_heads_x2", "param_matched_G1"):
        return  # their projections (or FFN widths) change shape: nothing more in common
    # everything else the baseline has, it shares, except what the variant widens or replaces
    widened = {n for n in base if n not in shared}
    assert all(n.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight")) for n in widened)


@pytest.mark.parametrize("family", sorted(MOE_FAMILIES))
def test_moe_variants_share_the_moe_baselines_weights(family: str) -> None:
    base = _params(_model(3, "tiny-moe"))
    over = MOE_FAMILIES[family]
    if "moe" in over:  # keep the baseline's other MoE settings
        over = {"moe": {**ModelConfig.model_validate({"preset": "tiny-moe"}).moe.model_dump(),
                        **over["moe"]}}
    shared = _shared_equal(base, _params(_model(3, "tiny-moe", **over)))
    experts = [n for n in shared if ".deepspeed_experts.3." in n]
    assert experts and "embed.weight" in shared  # the first 4 experts are the baseline's


def test_adding_a_gate_changes_no_other_weight() -> None:
    """G1 elementwise is fused into q_proj: its shared q rows equal the ungated q_proj, and
    the only weights not in the baseline are the gate's rows."""
    base = _params(_model(11))
    gated = _params(_model(11, gates=[G1]))
    assert set(base) == set(gated)
    n_q = 4 * 16  # n_head x head_dim of `tiny`
    for name, t in base.items():
        if name.endswith("q_proj.weight"):
            assert gated[name].shape == (2 * n_q, 64)
            assert torch.equal(gated[name][:n_q], t), name
        else:
            assert torch.equal(gated[name], t), name
    # a gate with its own projection (headwise G1, unfused) adds a tensor and moves none
    headwise = _params(_model(11, gates=[{**G1, "granularity": "headwise"}]))
    assert set(headwise) - set(base) == {f"blocks.{i}.attn.gates.G1.proj.weight" for i in (0, 1)}
    assert all(torch.equal(headwise[n], t) for n, t in base.items())


def test_fused_and_unfused_gate_rows_draw_from_one_key() -> None:
    """The fused G1 rows come from the key an unfused G1 projection of that width would use:
    the same values whichever layout the attention module chose."""
    fused = _params(_model(2, gates=[G1]))["blocks.0.attn.q_proj.weight"][64:]
    model = _model(2, gates=[G1])
    from trainer.initialise import _normal

    assert torch.equal(fused, _normal(2, "blocks.0.attn.gates.G1.proj.weight", (64, 64), 0.02))
    assert model.blocks[0].attn.g1_width == 64


def test_switch_head_expert_zero_is_the_plain_projection() -> None:
    base = _params(_model(4))
    switch = _params(_model(4, switch_head={"targets": "kv", "n_experts": 4, "top_k": 1}))
    for which in ("k", "v"):
        w = switch[f"blocks.0.attn.{which}_proj.weight"]  # (Hkv, E, D, C)
        plain = base[f"blocks.0.attn.{which}_proj.weight"].reshape(2, 16, 64)
        assert torch.equal(w[:, 0], plain)
        assert not any(torch.equal(w[:, e], plain) for e in range(1, 4))


@pytest.mark.parametrize("combine", ["gated", "learned", "equal"])
def test_adding_nsa_or_its_gate_changes_no_other_weight(combine: str) -> None:
    """NSA's compression maps and branch gate are tensors of their own: the dense model's
    weights all stay, and the NSA model with and without its gate shares its compression."""
    base = _params(_model(12))
    nsa = _params(_model(12, nsa={"combine": combine}))
    assert all(torch.equal(nsa[n], t) for n, t in base.items())
    own = {"compress_k.weight", "compress_v.weight",
           *{"gated": ["combine.proj.weight"], "learned": ["combine.logit"], "equal": []}[combine]}
    assert set(nsa) - set(base) == {f"blocks.{i}.attn.nsa.{n}" for i in (0, 1) for n in own}
    equal = _params(_model(12, nsa={"combine": "equal"}))
    assert all(torch.equal(nsa[n], t) for n, t in equal.items())
    if combine == "learned":
        assert torch.equal(nsa["blocks.0.attn.nsa.combine.logit"], torch.zeros(4, 3))


def test_two_seeds_differ_in_every_random_weight() -> None:
    a, b = _params(_model(0, gates=[G1])), _params(_model(1, gates=[G1]))
    for name, t in a.items():
        if name.endswith("norm.weight"):
            assert torch.equal(t, b[name])  # ones at every seed
        else:
            assert not torch.equal(t, b[name]), name


def test_module_order_and_constructor_draws_do_not_matter() -> None:
    """The global RNG's state before the build changes nothing: only (seed, name) does."""
    torch.manual_seed(123)
    a = _params(_model(5, gates=[G1]))
    torch.manual_seed(456)
    torch.randn(1000)
    b = _params(_model(5, gates=[G1]))
    assert all(torch.equal(t, b[n]) for n, t in a.items())


def _legacy(seed: int, **over: Any) -> torch.nn.Module:
    seed_everything(seed)  # as trainer.train does before building
    return build_model(ModelConfig.model_validate({"preset": "tiny", "init": "legacy", **over}))


@pytest.mark.parametrize("family", ["baseline", "G1_elementwise", "G1_input_independent",
                                    "switch_kv_4top4", "sandwich_norm"])
def test_each_weight_keeps_the_legacy_distribution(family: str) -> None:
    """Only the random source changed: constants are the same constants, and every random
    weight has the std of the old rule (normal(0, init_std)) within its sampling error."""
    over = DENSE_FAMILIES.get(family, {})
    paired, legacy = _params(_model(9, **over)), _params(_legacy(9, **over))
    assert paired.keys() == legacy.keys()
    std = 0.02
    for name, p in paired.items():
        q = legacy[name]
        if q.numel() == 0 or float(q.std() if q.numel() > 1 else 0) == 0.0:
            assert torch.equal(p, q), name  # ones / zeros, exactly as before
            continue
        tol = 5 * std / math.sqrt(2 * p.numel())  # 5 standard errors of a sample std
        assert abs(float(p.std()) - std) < tol and abs(float(q.std()) - std) < tol, name
        assert abs(float(p.mean())) < 5 * std / math.sqrt(p.numel()), name


def _digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


# sha256 of the state dicts built by the code before paired initialisation existed (commit
# 61e6176, torch 2.13.0+cpu): seed_everything(seed) then build_model(cfg).
LEGACY_DIGESTS = {
    ("baseline", 0): "55b311ed7cb236ac38c184fef63767c5b0b3cecb6af1a4f02e893d3d0cfc02d5",
    ("G1_elementwise", 0): "ab567b824509ffc8fe4e077d681cd4c6bc245cf4e76a59d298efa75765e1cfca",
    ("G1_headwise", 0): "45adce6f59c183b1785dcc082a202210214ac26b8ad376c1efb5c3eaba5cdb69",
    ("baseline", 3): "dd2fdd0ec7f0f8c4d3cfa56509234129428f7906157e065aca303c42f0e2c10e",
    ("G1_elementwise", 3): "d898898258cc92cdf8817eb3a2de965f7d8a800a44adc491815db89252263ca8",
}


@pytest.mark.parametrize(("family", "seed"), sorted(LEGACY_DIGESTS))
def test_legacy_reproduces_the_old_weights_bit_for_bit(family: str, seed: int) -> None:
    over = DENSE_FAMILIES.get(family, {})
    assert _digest(_legacy(seed, **over)) == LEGACY_DIGESTS[(family, seed)]


def test_meta_models_stay_free() -> None:
    """Paper-size models on the meta device draw nothing (no memory, no time)."""
    cfg = ModelConfig.model_validate({"preset": "paper-dense-1p7b", "gates": [G1]})
    model = build_model(cfg, "meta")
    assert all(p.is_meta for p in model.parameters())


def test_a_parameter_without_a_rule_is_an_error() -> None:
    model = _model(0)
    model.blocks[0].attn.extra = torch.nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match=r"no initialisation rule for parameter "
                                         r"'blocks.0.attn.extra'"):
        initialise_paired(model, 0, 0.02)
    assert rule(model.norm, "weight", "norm.weight") == "ones" and len(RULES) == 6


@pytest.mark.parametrize("stage", [0, 3])
def test_the_engine_starts_from_the_paired_weights(stage: int) -> None:
    """Init happens in build_model, before DeepSpeed partitions anything: under ZeRO-3 the
    gathered parameters are the paired ones."""
    import deepspeed

    from contract.config import RunSpec
    from trainer.dist import ensure_single_process_dist
    from trainer.engine import build_engine, resolve_precision

    spec = RunSpec(name="z", seed=6, model={"preset": "tiny", "gates": [G1]},
                   train={"zero_stage": stage, "precision": "fp32", "steps": 2, "warmup": 0})
    ensure_single_process_dist()
    engine = build_engine(build_model(spec.model, seed=spec.seed), spec,
                          resolve_precision("fp32"))
    want = _params(_model(6, gates=[G1]))
    params = dict(engine.module.named_parameters())
    with deepspeed.zero.GatheredParameters(list(params.values()), enabled=stage == 3):
        for name, p in params.items():
            assert torch.equal(p.detach().cpu(), want[name]), name
