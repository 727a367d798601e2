"""The DeepSpeed engine: precision choice, generated config, optimizer, ``initialize``.

- Precision: ``auto`` = bf16 on a CUDA device that supports it, else fp32. When bf16 is wanted
  (``auto`` or ``bf16``) but unavailable we say so once per process ("precision fell back to
  fp32 because ...") instead of failing or silently changing the numbers.
- Optimizer: a torch ``AdamW`` passed to DeepSpeed (DeepSpeed's own Adam compiles a C++ op for
  ~100 s on CPU). Weight decay on matrices only (dim >= 2), not on norms/biases/scalar gates.
- The learning rate is NOT a DeepSpeed scheduler: trainer/schedule.py computes it from the step
  and ``set_lr`` writes it before every optimizer step, which keeps resume trivial.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch

from trainer.config import RunSpec

log = logging.getLogger("trainer")
_warned: set[str] = set()


@dataclass(frozen=True)
class Precision:
    name: str  # "bf16" | "fp32"
    reason: str  # why, when it is not what was asked for ("" otherwise)


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning(message)


def resolve_precision(requested: str, device: str | None = None) -> Precision:
    """Pick bf16 or fp32 for ``train.precision`` on ``device`` (default: cuda if available)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "fp32":
        return Precision("fp32", "")
    if device == "cuda" and torch.cuda.is_bf16_supported():
        return Precision("bf16", "")
    why = ("there is no CUDA device (bf16 on CPU is slow and unsupported by DeepSpeed's CPU "
           "path)" if device != "cuda" else "this GPU does not support bf16")
    p = Precision("fp32", f"precision fell back to fp32 because {why} "
                          f"(train.precision: {requested})")
    _warn_once(p.reason)
    return p


def ds_config(spec: RunSpec, precision: Precision, world_size: int = 1) -> dict[str, Any]:
    """The DeepSpeed JSON config of a run."""
    t = spec.train
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": t.batch_size,
        "gradient_accumulation_steps": t.grad_accum,
        "train_batch_size": t.batch_size * t.grad_accum * world_size,
        "gradient_clipping": t.grad_clip,
        "zero_optimization": {"stage": t.zero_stage},
        "zero_allow_untested_optimizer": True,  # our torch AdamW under ZeRO
        "steps_per_print": 10**9,  # we report through the Reporter, not stdout
        "wall_clock_breakdown": False,
    }
    if precision.name == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices; not norms, biases or per-head scalars. MoE experts get their own groups."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay, "name": "decay"},
              {"params": no_decay, "weight_decay": 0.0, "name": "no_decay"}]
    groups = [g for g in groups if g["params"]]
    if any(hasattr(p, "allreduce") and not p.allreduce for p in model.parameters()):
        # DeepSpeed's ZeRO needs expert and dense parameters in separate groups.
        from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer

        groups = split_params_into_different_moe_groups_for_optimizer(groups)
    return groups


def build_engine(model: torch.nn.Module, spec: RunSpec, precision: Precision,
                 world_size: int = 1) -> Any:
    """``deepspeed.initialize`` with a torch AdamW; returns the engine."""
    import deepspeed

    t = spec.train
    if spec.model.moe is not None and t.zero_stage == 3:
        raise ValueError("train.zero_stage: DeepSpeed's MoE layer trains under ZeRO 0-2, not 3; "
                         "use zero_stage 0, 1 or 2 for MoE models")
    opt = torch.optim.AdamW(param_groups(model, t.weight_decay), lr=t.lr, betas=t.betas,
                            eps=1e-8)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=ds_config(spec, precision, world_size))
    return engine


def set_lr(engine: Any, lr: float) -> None:
    for group in engine.optimizer.param_groups:
        group["lr"] = lr
