"""The DeepSpeed engine: precision choice, generated config, optimizer, ``initialize``.

- Precision: ``auto`` = bf16 on a CUDA device that supports it, else fp32. When bf16 is wanted
  (``auto`` or ``bf16``) but unavailable we say so once per process ("precision fell back to
  fp32 because ...") instead of failing or silently changing the numbers.
- Optimizer: a torch ``AdamW`` passed to DeepSpeed (DeepSpeed's own Adam compiles a C++ op for
  ~100 s on CPU). Weight decay on matrices only (dim >= 2), not on norms/biases/scalar gates.
- The learning rate is NOT a DeepSpeed scheduler: trainer/schedule.py computes it from the step
  and ``set_lr`` writes it before every optimizer step, which keeps resume trivial.
- Nothing per step that DeepSpeed does not need: its throughput timer is off (enabled
  by default, it synchronises the device twice a step); at ZeRO 0 bf16 is DeepSpeed's
  ``torch_autocast`` mode (fp32 weights, bf16 matmuls, exactly the bare loop's
  ``torch.autocast``) rather than its bf16 optimizer, whose overflow check reads the grad norm
  back to the host every step; and at ZeRO 0 without MoE the trainer clips itself
  (``clip_grad``: one fused foreach norm whose pre-clip value stays on the device) instead of
  DeepSpeed's per-parameter clip plus a separate norm for reporting. ZeRO 1-3 and MoE keep
  DeepSpeed's bf16 optimizer and clipping (their gradients are partitioned or rank-specific).
- ``train.compile``: ``engine.compile()`` after ``initialize``. DeepSpeed compiles the wrapped
  module *in place* (``nn.Module.compile``), so parameter names, checkpoints and the optimizer
  are those of the eager model and a compiled run resumes an eager checkpoint and vice versa;
  DeepSpeed's backward/step stay eager (only the forward graph, and its autograd backward, are
  compiled). Gates are module attributes fixed at build time, so a gated model is one graph;
  evaluation (``no_grad``) and the probes compile once more each, never per step
  (tests/trainer/test_train.py counts the compiles).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from contract.config import RunSpec

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
        # on by default and synchronised: two device syncs per step for a figure nobody reads
        "timers": {"throughput": {"enabled": False}},
    }
    if trainer_clips(spec):
        cfg["gradient_clipping"] = 0.0  # clip_grad does it (and keeps the norm)
    if precision.name == "bf16" and t.zero_stage == 0:
        cfg["torch_autocast"] = {"enabled": True, "dtype": "bfloat16"}
    elif precision.name == "bf16":
        cfg["bf16"] = {"enabled": True}
    return cfg


def trainer_clips(spec: RunSpec) -> bool:
    """True when the trainer clips (ZeRO 0, no MoE): full, identical gradients on every rank."""
    return spec.train.zero_stage == 0 and spec.model.moe is None


def clip_grad(module: torch.nn.Module, max_norm: float) -> torch.Tensor:
    """Clip the gradients in ``.grad`` to ``max_norm`` (0 = off); the pre-clip global L2 norm,
    a 0-d tensor left on the device (no host sync)."""
    params = [p for p in module.parameters() if p.grad is not None]  # one walk of the module
    if not params:
        return torch.zeros(())
    norm = torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None],
                                         foreach=None)
    if max_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm, foreach=None)
    return norm


def grad_norm(engine: Any) -> torch.Tensor:
    """DeepSpeed's pre-clip global norm after ``engine.step()`` (ZeRO 1-3, MoE) as a device
    tensor; 0 when DeepSpeed keeps none."""
    value = engine.get_global_grad_norm()
    if value is None:
        return torch.zeros((), device=engine.device)
    return torch.as_tensor(value, dtype=torch.float32, device=engine.device)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices; not norms, biases or per-head scalars. MoE experts get their own groups."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
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

    t = spec.train  # MoE + ZeRO 3 is refused by RunSpec (contract/config.py)
    # fused: one kernel per parameter for the whole update, on CUDA and CPU alike (at `small`
    # on 2 CPU cores 9 ms a step instead of 66 ms; the unfused update also reads each
    # parameter's step count back to the host). Only at ZeRO 0, where the optimizer is ours,
    # unwrapped; ZeRO 1-3 hand it flat partitions of their own.
    fused = t.zero_stage == 0
    opt = torch.optim.AdamW(param_groups(model, t.weight_decay), lr=t.lr, betas=t.betas,
                            eps=1e-8, fused=fused or None)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=ds_config(spec, precision, world_size))
    if trainer_clips(spec) and engine.dp_world_size == 1:
        # A one-rank all-reduce changes nothing, but DeepSpeed still flattens every gradient
        # into a bucket, all-reduces it, divides it by 1 and copies it back: ~3 passes over
        # the gradients and 2 kernels per parameter each step (benchmarks/step_census.py).
        engine.enable_backward_allreduce = False
    if t.compile:
        # dynamic=False: every step has the same shapes; a shape change would recompile
        # rather than silently fall back to a slower dynamic-shape graph.
        engine.compile(compile_kwargs={"dynamic": False})
    return engine


def train_step(engine: Any, micro_batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
               grad_clip: float, own_clip: bool) -> torch.Tensor:
    """One optimizer update over ``micro_batches`` (host tensors, (B, T) each), the trainer's and
    the throughput benchmark's alike. Returns (mean total loss, mean CE loss, pre-clip grad
    norm), a (3,) tensor left on the device: nothing here waits for the device."""
    device = engine.device
    total, n, norm = torch.zeros(2, device=device), 0, None
    batches = list(micro_batches)
    for i, (x, y) in enumerate(batches):
        out = engine(to_device(x, device), to_device(y, device))
        engine.backward(out.loss)
        if i == len(batches) - 1 and own_clip:
            norm = clip_grad(engine.module, grad_clip)
        engine.step()
        total += torch.stack([out.loss.detach().float(), out.ce_loss.detach().float()])
        n += 1
    if norm is None:
        norm = grad_norm(engine)
    return torch.cat([total / max(n, 1), norm.detach().float().reshape(1)])


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host batch -> device. On CUDA through pinned memory with a non-blocking copy, so the
    copy is queued like a kernel instead of stalling the host until it is done."""
    if device.type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def set_lr(engine: Any, lr: float) -> None:
    for group in engine.optimizer.param_groups:
        group["lr"] = lr
