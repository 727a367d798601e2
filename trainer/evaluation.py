"""Validation loss / perplexity and the mechanistic probes, as Reporter metrics.

PPL is ``exp(mean CE)`` over a fixed list of held-out batches (the mean of per-batch means;
all batches have the same shape, so this is the token mean). Probes run on ONE fixed
validation batch through ``model.probe`` (the explicit-softmax path), never during training
steps. The gate-score histogram is a JSON artifact: 20 bins over [0, 1] when every score lies
there (sigmoid gates), else over the observed range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from contract import metrics
from trainer.data import Batch

# each probe's metric names start with one of these
PROBE_PREFIX: dict[str, tuple[str, ...]] = {
    "attention_sink": (metrics.FIRST_TOKEN_ATTENTION,),
    "massive_activations": (metrics.MAX_ACTIVATION,),
    "gate_scores": (metrics.GATE_SCORE_MEAN, metrics.NSA_BRANCH_WEIGHT)}
HIST_BINS = 20


def perplexity(loss: float) -> float:
    return math.exp(loss) if loss < 700 else math.inf


@torch.no_grad()
def validation_loss(engine: Any, batches: Sequence[Batch], device: torch.device) -> float:
    """Mean cross-entropy of the model on ``batches`` (eval mode, restored afterwards)."""
    was_training = engine.training
    engine.eval()
    try:
        losses = [float(engine(x.to(device), y.to(device)).ce_loss) for x, y in batches]
    finally:
        engine.train(was_training)
    return sum(losses) / len(losses)


def _histogram(scores: list[torch.Tensor | None], step: int) -> dict[str, Any] | None:
    gated = {i: s.float().flatten() for i, s in enumerate(scores) if s is not None}
    if not gated:
        return None
    lo = min(float(s.min()) for s in gated.values())
    hi = max(float(s.max()) for s in gated.values())
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0
    hi = hi if hi > lo else lo + 1e-6
    edges = torch.linspace(lo, hi, HIST_BINS + 1).tolist()
    layers = {f"layer_{i}": torch.histc(s, HIST_BINS, lo, hi).long().tolist()
              for i, s in gated.items()}
    return {"step": step, "edges": edges, "layers": layers}


@torch.no_grad()
def probe_metrics(module: Any, idx: torch.Tensor, probes: Sequence[str],
                  step: int) -> tuple[dict[str, float], dict[str, Any] | None]:
    """probe/* metrics of the selected ``probes`` on ``idx`` (B, T) + the gate histogram."""
    if not probes:
        return {}, None
    was_training = module.training
    module.eval()
    try:
        result = module.probe(idx)
    finally:
        module.train(was_training)
    prefixes = tuple(prefix for p in probes for prefix in PROBE_PREFIX[p])
    values = {k: float(v) for k, v in result.metrics().items() if k.startswith(prefixes)}
    hist = _histogram(result.gate_scores, step) if "gate_scores" in probes else None
    return values, hist
