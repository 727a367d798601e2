"""How Native Sparse Attention mixes its three branches (``model.nsa.combine``): o = sum_c w_c o_c.

- ``gated``: NSA's own (Eq. 5), w = sigmoid(x W), W (d_model -> n_head * 3): per token, head
  and branch, read from the pre-normed block input x like every gate here. Each weight is in
  (0, 1) on its own; the three are not normalised (NSA does not normalise them either).
- ``learned``: w = sigmoid(logit), one logit per head and branch, zero at the start (0.5 each,
  NSA's gate at init): the input-independent control.
- ``equal``: 1/3 each, nothing learned: the branches without any gate.
Output (B, T, H, 3) for ``gated``, (1, 1, H, 3) otherwise; branch order compressed, selected,
window; the projection's output feature h * 3 + c is head h's weight of branch c.
"""

from __future__ import annotations

import torch
from torch import nn

from contract.config import NSACombine
from contract.params import NSA_BRANCHES


class BranchWeights(nn.Module):
    def __init__(self, mode: NSACombine, d_model: int, n_head: int) -> None:
        super().__init__()
        self.mode, self.n_head = mode, n_head
        self.proj = nn.Linear(d_model, n_head * NSA_BRANCHES, bias=False) \
            if mode == "gated" else None
        # zeros: trainer/initialise.py RULES says so for paired init too
        self.logit = nn.Parameter(torch.zeros(n_head, NSA_BRANCHES)) \
            if mode == "learned" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, d_model) -> weights (B, T, H, 3) or (1, 1, H, 3)."""
        if self.proj is not None:
            B, T, _ = x.shape
            return torch.sigmoid(self.proj(x)).view(B, T, self.n_head, NSA_BRANCHES)
        if self.logit is not None:
            return torch.sigmoid(self.logit)[None, None]
        return x.new_full((1, 1, self.n_head, NSA_BRANCHES), 1.0 / NSA_BRANCHES)

    def branch_means(self, x: torch.Tensor) -> torch.Tensor | None:
        """x (B, T, d_model) -> each branch's weight averaged over batch, tokens and heads, (3,),
        for the gate-score probe; None for ``equal``: no gate (its 1/3 is a constant, not a
        measurement), as an ungated layer has no gate scores."""
        if self.mode == "equal":
            return None
        w: torch.Tensor = self(x)  # (B, T, H, 3) or (1, 1, H, 3)
        return w.float().mean(dim=(0, 1, 2))
