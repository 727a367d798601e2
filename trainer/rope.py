"""Rotary position embeddings with optional context-extension scaling.

``rope_cache`` returns (cos, sin) of shape (T, head_dim) in the "rotate-half" layout
(Llama/Qwen): the first and second halves of a head are the two coordinates of each pair.

Scaling methods (``RopeScaling.method``), used by the long-context evaluation:
- ``none``: plain RoPE.
- ``linear``: position interpolation, positions divided by ``factor``.
- ``ntk``: NTK-aware base change, base * factor ** (d / (d - 2)), so the lowest frequency is
  interpolated by ``factor`` while the highest stays unchanged.
- ``yarn``: YaRN (Peng et al. 2023), per-frequency blend of interpolation and extrapolation
  with a linear ramp between wavelengths that fit ``beta_fast``=32 and ``beta_slow``=1 times
  into ``original_max_len``, plus the attention temperature 0.1*ln(factor)+1 folded into
  cos/sin (as the HF implementation does, so q.k scales by its square).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

RopeMethod = Literal["none", "linear", "ntk", "yarn"]
_METHODS = ("none", "linear", "ntk", "yarn")
YARN_BETA_FAST = 32.0
YARN_BETA_SLOW = 1.0


@dataclass(frozen=True)
class RopeScaling:
    """How to stretch RoPE beyond the training length ``original_max_len``."""

    method: RopeMethod = "none"
    factor: float = 1.0
    original_max_len: int = 0

    def __post_init__(self) -> None:
        if self.method not in _METHODS:
            raise ValueError(f"RopeScaling.method: {self.method!r}; expected one of {_METHODS}")
        if not self.factor >= 1.0:
            raise ValueError(f"RopeScaling.factor: {self.factor} must be >= 1")
        if self.method == "yarn" and self.original_max_len < 1:
            raise ValueError("RopeScaling.original_max_len: required (>= 1) for method 'yarn'")


def inv_frequencies(head_dim: int, base: float, scaling: RopeScaling | None = None) -> torch.Tensor:
    """(head_dim/2,) angular frequencies per pair, after the scaling method's adjustment."""
    if head_dim % 2:
        raise ValueError(f"model.head_dim: RoPE needs an even head_dim, got {head_dim}")
    if scaling is not None and scaling.method == "ntk":
        base = base * scaling.factor ** (head_dim / (head_dim - 2))
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = 1.0 / (base ** exponents)  # (D/2,)
    if scaling is not None and scaling.method == "yarn":
        inv_freq = _yarn_blend(inv_freq, scaling)
    return inv_freq


def _yarn_blend(inv_freq: torch.Tensor, scaling: RopeScaling) -> torch.Tensor:
    # rotations of each pair over the original context: many -> keep (extrapolate),
    # few -> interpolate by factor, in between a linear ramp.
    rotations = scaling.original_max_len * inv_freq / (2 * math.pi)
    keep = ((rotations - YARN_BETA_SLOW) / (YARN_BETA_FAST - YARN_BETA_SLOW)).clamp(0.0, 1.0)
    return inv_freq / scaling.factor * (1.0 - keep) + inv_freq * keep


def attention_scale(scaling: RopeScaling | None) -> float:
    """YaRN's cos/sin multiplier (1.0 for the other methods)."""
    if scaling is None or scaling.method != "yarn" or scaling.factor <= 1.0:
        return 1.0
    return 0.1 * math.log(scaling.factor) + 1.0


def rope_cache(head_dim: int, seq_len: int, base: float, scaling: RopeScaling | None = None,
               device: torch.device | str | None = None,
               dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (seq_len, head_dim), for positions 0..seq_len-1."""
    inv_freq = inv_frequencies(head_dim, base, scaling)
    pos = torch.arange(seq_len, dtype=torch.float64)
    if scaling is not None and scaling.method == "linear":
        pos = pos / scaling.factor
    angles = torch.outer(pos, inv_freq)  # (T, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (T, D)
    mscale = attention_scale(scaling)
    cos = (angles.cos() * mscale).to(device=device, dtype=dtype)
    sin = (angles.sin() * mscale).to(device=device, dtype=dtype)
    return cos, sin


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x (B, T, H, D) by position; cos/sin are (T, D)."""
    cos = cos[:, None, :].to(x.dtype)  # (T, 1, D), broadcasts over heads
    sin = sin[:, None, :].to(x.dtype)
    return x * cos + rotate_half(x) * sin
