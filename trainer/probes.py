"""Mechanistic probes: attention sink, massive activations, gate scores (paper Table 4).

Definitions (the paper's, made precise):
- first-token attention (F-Attn): attention mass on key position 0, averaged over batch, heads
  and queries. Query 0 is *skipped*: causally it can only attend to key 0, so it would add a
  constant 1 that says nothing about sinks and inflates short sequences.
- max activation (M-Act): max |hidden state| of each layer's output (the residual stream after
  the block), over the probe batch.
- gate scores: the scores of the layer's first gate (``cfg.gates[0]``) on the probe batch,
  flattened; None for an ungated layer.
Each is reported per layer and averaged over layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from contract import metrics


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
        return out
