"""Mechanistic probes: attention sink, massive activations, gate scores (paper Table 4).

Definitions (the paper's, made precise):
- first-token attention (F-Attn): attention mass on key position 0, averaged over batch, heads
  and queries. Query 0 is *skipped*: causally it can only attend to key 0, so it would add a
  constant 1 that says nothing about sinks and inflates short sequences.
- max activation (M-Act): max |hidden state| of each layer's output (the residual stream after
  the block), over the probe batch.
- gate scores: the scores of the layer's first gate (``cfg.gates[0]``) on the probe batch,
  flattened; None for an ungated layer.
- NSA branch weights (part of the gate-score probe): under Native Sparse Attention with a
  ``gated`` or ``learned`` combination, each branch's weight (compressed, selected, window)
  averaged over batch, tokens and heads; None under dense attention and under ``equal`` (no
  gate: 1/3 each by construction, nothing to measure).
Each is reported per layer and averaged over layers (for the branch weights: per branch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from contract import metrics
from contract.params import NSA_BRANCH_NAMES


def first_token_column(att: torch.Tensor) -> torch.Tensor:
    """att (B, H, T, T) -> (T,): per query, the mass on key 0 averaged over batch and heads."""
    return att[..., 0].float().mean(dim=(0, 1))


def first_token_share(column: torch.Tensor) -> float:
    """Mean of a first_token_column over queries, skipping query 0 (when T > 1)."""
    return float(column[1:].mean() if column.numel() > 1 else column.mean())


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


@dataclass
class ProbeResult:
    """Per-layer probe values; index l is layer l."""

    first_token_attention: list[float]
    max_activation: list[float]
    gate_scores: list[torch.Tensor | None]
    branch_weights: list[torch.Tensor | None] = field(default_factory=list)  # (3,) per layer

    @property
    def first_token_attention_mean(self) -> float:
        return _mean(self.first_token_attention)

    @property
    def max_activation_mean(self) -> float:
        return _mean(self.max_activation)

    @property
    def gate_score_means(self) -> list[float | None]:
        return [None if s is None else float(s.mean()) for s in self.gate_scores]

    @property
    def gate_score_mean(self) -> float | None:
        """Mean over gated layers of each layer's mean score; None if the model is ungated."""
        vals = [m for m in self.gate_score_means if m is not None]
        return _mean(vals) if vals else None

    @property
    def branch_weight_means(self) -> dict[str, float] | None:
        """Per NSA branch, the mean over layers of its layer mean weight; None when no layer
        has a branch gate (dense attention, or NSA's ``equal`` combination)."""
        layers = [w for w in self.branch_weights if w is not None]
        if not layers:
            return None
        mean = torch.stack(layers).mean(dim=0)  # (3,)
        return {name: float(mean[c]) for c, name in enumerate(NSA_BRANCH_NAMES)}

    def metrics(self) -> dict[str, float]:
        """The probe/* metrics (contract/metrics.py names), means and /layer_i values."""
        out = {metrics.FIRST_TOKEN_ATTENTION: self.first_token_attention_mean,
               metrics.MAX_ACTIVATION: self.max_activation_mean}
        for i, (f, m) in enumerate(zip(self.first_token_attention, self.max_activation)):
            out[metrics.per_layer(metrics.FIRST_TOKEN_ATTENTION, i)] = f
            out[metrics.per_layer(metrics.MAX_ACTIVATION, i)] = m
        if self.gate_score_mean is not None:
            out[metrics.GATE_SCORE_MEAN] = self.gate_score_mean
            for i, g in enumerate(self.gate_score_means):
                if g is not None:
                    out[metrics.per_layer(metrics.GATE_SCORE_MEAN, i)] = g
        return {**out, **self._branch_metrics()}

    def _branch_metrics(self) -> dict[str, float]:
        """Each branch's mean weight and its /layer_i values (empty without a branch gate)."""
        means = self.branch_weight_means
        if means is None:
            return {}
        out = {metrics.nsa_branch_weight(b): m for b, m in means.items()}
        for i, w in enumerate(self.branch_weights):
            if w is not None:
                out.update({metrics.per_layer(metrics.nsa_branch_weight(b), i): float(w[c])
                            for c, b in enumerate(NSA_BRANCH_NAMES)})
        return out
