"""Paired initial weights: every parameter's value is a function of (seed, its name) only.

``initialise_paired(model, seed)`` redraws each parameter of a built model from a generator
keyed by (seed, the parameter's qualified name) (trainer/keyed.py), after the constructors
drew theirs. Module order, the constructors' own draws and parameters a variant adds no longer
move any other weight: a baseline and a variant at one seed start every weight they share (same
name and shape) bit for bit equal, so the seed-to-seed noise of the initialisation cancels in
their paired difference (its variance is var(a) + var(b) - 2 cov(a, b); pairing buys the
covariance). This is what Flax does by folding each module's name into its RNG.

Where one tensor holds pieces of different origin, the module that owns the layout says so
(``init_parts() -> {local parameter name: [Part]}``, trainer/keyed.py): the G1 gate rows fused
into ``q_proj`` draw from the unfused gate projection's key (``gates.G1.proj.weight``), the
shared q rows from ``q_proj.weight`` exactly as the ungated model's whole ``q_proj``; a
SwitchHead projection's expert 0 draws what the plain k/v projection it replaces does, each
other expert from a key of its own. NSA's compression maps and branch gate are whole tensors of
their own (``attn.nsa.*``), so adding NSA moves no weight the dense model has.

The distribution of each parameter is today's rule (``RULES``), unchanged: normal(0,
``init_std``) for every projection and embedding (tied: drawn once, as ``embed.weight``), ones
for RMSNorm weights, zeros for an input-independent gate's logits. A parameter no rule covers is
an error naming it, so a new module cannot silently keep its constructor's draw. Values are
drawn on the CPU and copied, so they do not depend on the device either. Meta tensors are
skipped (paper-size models counted on the meta device stay free). Call it before DeepSpeed
partitions the parameters (ZeRO-3): trainer/model.py's ``build_model`` does, before
trainer/engine.py wraps the model.

Expert-parallel MoE (``moe.ep_size`` > 1): DeepSpeed names each rank's local experts 0..E/ep - 1,
so the ranks draw the same values for their local experts -- as the legacy scheme, one global
RNG seeded alike on every rank, did too.

``model.init: legacy`` (runs stored before this existed) keeps the old draws: the global RNG,
seeded by the trainer, in module order (``GatedLM._init_weights`` after the constructors).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from trainer.gates import Gate
from trainer.keyed import Part, keyed_generator
from trainer.norms import RMSNorm
from trainer.nsa_combine import BranchWeights
from trainer.switch_head import SwitchProjection

KEY = "init"  # the first part of every init key, so no init key is ever a data key
# (module type, parameter name) -> how it starts; "normal" is normal(0, init_std)
RULES: dict[tuple[type[nn.Module], str], str] = {
    (nn.Linear, "weight"): "normal",
    (nn.Embedding, "weight"): "normal",
    (SwitchProjection, "weight"): "normal",
    (RMSNorm, "weight"): "ones",
    (Gate, "logit"): "zeros",
    (BranchWeights, "logit"): "zeros",  # NSA's learned branch weights: sigmoid(0) each
}


def rule(module: nn.Module, pname: str, qualified: str) -> str:
    """The init rule of parameter ``pname`` of ``module`` ("normal" | "ones" | "zeros")."""
    for (kind, name), how in RULES.items():
        if isinstance(module, kind) and pname == name:
            return how
    raise ValueError(f"no initialisation rule for parameter {qualified!r} "
                     f"({type(module).__name__}.{pname}); add one to trainer/initialise.py RULES")


def _normal(seed: int, key: str, shape: tuple[int, ...], std: float) -> torch.Tensor:
    return torch.empty(shape).normal_(0.0, std, generator=keyed_generator(KEY, seed, key))


def _declared_parts(model: nn.Module) -> dict[str, list[Part]]:
    """Qualified parameter name -> its parts (keys qualified), from every ``init_parts``."""
    out: dict[str, list[Part]] = {}
    for prefix, module in model.named_modules():
        declare: Callable[[], dict[str, list[Part]]] | None = getattr(module, "init_parts", None)
        if declare is None:
            continue
        dot = f"{prefix}." if prefix else ""
        for pname, parts in declare().items():
            out[dot + pname] = [Part(dot + p.key, p.shape, p.index) for p in parts]
    return out


@torch.no_grad()
def initialise_paired(model: nn.Module, seed: int, std: float) -> None:
    """Redraw every parameter of ``model`` from its (seed, name) key (module docstring)."""
    parts = _declared_parts(model)
    for name, p in model.named_parameters():  # tied weights once, under their first name
        if p.is_meta:
            continue
        owner, _, pname = name.rpartition(".")
        how = rule(model.get_submodule(owner), pname, name)
        if how != "normal":
            p.fill_(1.0 if how == "ones" else 0.0)
            continue
        pieces = parts.get(name, [Part(name, tuple(p.shape), ())])
        if sum(math.prod(part.shape) for part in pieces) != p.numel():
            raise ValueError(f"init_parts of {name!r} cover {[x.shape for x in pieces]}, not "
                             f"its {tuple(p.shape)}")
        for part in pieces:
            target = p[part.index]
            target.copy_(_normal(seed, part.key, part.shape, std).reshape(target.shape))
