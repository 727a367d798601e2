"""RoPE and its context-extension scalings."""

from __future__ import annotations

import math

import pytest
import torch

from contract.config import ModelConfig
from trainer.model import build_model
from trainer.rope import RopeScaling, apply_rope, attention_scale, inv_frequencies, rope_cache

D, BASE = 64, 10000.0


def _dot(q: torch.Tensor, k: torch.Tensor, m: int, n: int, scaling=None) -> float:
    cos, sin = rope_cache(D, max(m, n) + 1, BASE, scaling, dtype=torch.float64)
    qr = apply_rope(q.view(1, 1, 1, D).expand(1, max(m, n) + 1, 1, D), cos, sin)
    kr = apply_rope(k.view(1, 1, 1, D).expand(1, max(m, n) + 1, 1, D), cos, sin)
    return float((qr[0, m, 0] * kr[0, n, 0]).sum())


def test_rope_scores_depend_only_on_relative_position() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(D, generator=g, dtype=torch.float64), torch.randn(D, generator=g,
                                                                         dtype=torch.float64)
    assert _dot(q, k, 7, 3) == pytest.approx(_dot(q, k, 40, 36), abs=1e-9)
    assert _dot(q, k, 7, 3) != pytest.approx(_dot(q, k, 7, 5), abs=1e-3)
    assert _dot(q, k, 0, 0) == pytest.approx(float(q @ k), abs=1e-9)  # position 0: no rotation


def test_plain_frequencies() -> None:
    f = inv_frequencies(D, BASE)
    assert f.shape == (D // 2,) and f[0] == 1.0
    assert float(f[-1]) == pytest.approx(BASE ** (-(D - 2) / D))


def test_linear_scaling_interpolates_positions() -> None:
    s = RopeScaling("linear", 4.0, 128)
    cos_s, sin_s = rope_cache(D, 64, BASE, s)
    cos, sin = rope_cache(D, 256, BASE)
    torch.testing.assert_close(cos_s[8], cos[2])  # position 8 / 4 = 2
    torch.testing.assert_close(sin_s[12], sin[3])


def test_ntk_keeps_the_highest_and_interpolates_the_lowest_frequency() -> None:
    f0, f = inv_frequencies(D, BASE), inv_frequencies(D, BASE, RopeScaling("ntk", 8.0, 128))
    assert float(f[0]) == pytest.approx(float(f0[0]))
    assert float(f[-1]) == pytest.approx(float(f0[-1]) / 8.0, rel=1e-9)


def test_yarn_blends_extrapolation_and_interpolation() -> None:
    s = RopeScaling("yarn", 4.0, 1024)
    f0, f = inv_frequencies(D, BASE), inv_frequencies(D, BASE, s)
    rotations = 1024 * f0 / (2 * math.pi)
    fast, slow = rotations > 32, rotations < 1
    assert fast.any() and slow.any() and (~fast & ~slow).any()
    torch.testing.assert_close(f[fast], f0[fast])  # many rotations: unchanged
    torch.testing.assert_close(f[slow], f0[slow] / 4.0)  # under one rotation: interpolated
    mid = ~fast & ~slow
    assert torch.all(f[mid] < f0[mid]) and torch.all(f[mid] > f0[mid] / 4.0)
    assert attention_scale(s) == pytest.approx(0.1 * math.log(4.0) + 1.0)
    cos, _ = rope_cache(D, 4, BASE, s)
    assert float(cos[0, 0]) == pytest.approx(attention_scale(s))  # temperature folded in


def test_factor_one_is_plain_rope() -> None:
    plain = rope_cache(D, 32, BASE)
    for method in ("linear", "ntk", "yarn"):
        scaled = rope_cache(D, 32, BASE, RopeScaling(method, 1.0, 16))
        torch.testing.assert_close(scaled, plain)


@pytest.mark.parametrize("kwargs,field", [(dict(method="cubic"), "method"),
                                          (dict(method="linear", factor=0.5), "factor"),
                                          (dict(method="yarn", factor=2.0), "original_max_len")])
def test_bad_scaling_is_rejected_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"RopeScaling.{field}"):
        RopeScaling(**kwargs)


def test_model_set_rope_scaling() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(preset="tiny", rope_base=100.0))
    idx = torch.randint(0, 256, (1, 32))
    plain = model(idx).logits
    model.set_rope_scaling(RopeScaling("yarn", 4.0, 8))
    scaled = model(idx).logits
    assert not torch.allclose(plain, scaled)
    model.set_rope_scaling(None)
    torch.testing.assert_close(model(idx).logits, plain)
