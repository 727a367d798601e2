"""Learning-rate schedule: linear warmup, then cosine / linear decay to ``min_lr`` (or constant).

The schedule is a pure function of the optimizer-step index, so resuming from a checkpoint
needs nothing but the step: no scheduler object whose state could drift from the run's.

Step ``s`` is 0-based: ``lr_at(0, cfg)`` is the rate used by the first optimizer step.
- warmup (``s < warmup``): ``lr * (s + 1) / warmup``, so the first step is not wasted at 0
  and step ``warmup - 1`` reaches the peak.
- decay (``warmup <= s < steps``): progress ``p = (s - warmup) / (steps - 1 - warmup)``
  in [0, 1]; the last step uses exactly ``min_lr``.
  cosine: ``min + (lr - min) * 0.5 * (1 + cos(pi * p))``; linear: ``lr - (lr - min) * p``;
  constant: ``lr`` (``min_lr`` is ignored).
- past the end (``s >= steps``): the final value.
"""

from __future__ import annotations

import math

from contract.config import TrainConfig


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for 0-based optimizer step ``step`` of a run configured by ``cfg``."""
    if step < 0:
        raise ValueError(f"lr_at: step must be >= 0, got {step}")
    peak, floor = cfg.lr, cfg.final_lr
    if step < cfg.warmup:
        return peak * (step + 1) / cfg.warmup
    if cfg.schedule == "constant":
        return peak
    span = cfg.steps - 1 - cfg.warmup
    progress = 1.0 if span <= 0 else min(1.0, (step - cfg.warmup) / span)
    if cfg.schedule == "linear":
        return peak - (peak - floor) * progress
    return floor + (peak - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))
