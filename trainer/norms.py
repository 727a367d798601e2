"""RMSNorm, used for the pre-norm blocks, QK-norm, sandwich norm and the G1 RMSNorm control."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """y = x / rms(x) * weight over the last dimension (no bias, no mean subtraction).

    The statistic is computed in fp32 so bf16 activations do not lose the small values that
    the norm is supposed to rescale.
    """

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight
