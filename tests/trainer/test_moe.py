"""MoE FFN through deepspeed.moe.layer.MoE: routing, aux loss, gradients, top-k > 2."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from contract.config import ModelConfig
from trainer.model import build_model
from trainer.moe import MoEFFN

torch.set_num_threads(1)


def _cfg(n_experts: int = 4, top_k: int = 2, cap: float | None = None, **kw) -> ModelConfig:
    # capacity_factor = E means capacity >= tokens * k: nothing is dropped
    moe = dict(n_experts=n_experts, top_k=top_k, d_expert=32,
               capacity_factor=cap if cap is not None else float(n_experts))
    return ModelConfig(**{"preset": "tiny-moe", "moe": moe, **kw})


def _reference(ffn: MoEFFN, x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense top-k mixture: softmax router, top-k, gates renormalised (k > 1) -> (y, counts)."""
    flat = x.reshape(-1, x.size(-1))
    probs = F.softmax(ffn.router(flat).float(), dim=-1)  # (N, E)
    top_p, top_i = probs.topk(k, dim=-1)
    if k > 1:
        top_p = top_p / top_p.sum(-1, keepdim=True)
    y = torch.zeros_like(flat)
    for slot in range(k):
        for e, expert in enumerate(ffn.experts):
            sel = top_i[:, slot] == e
            if sel.any():
                y[sel] += top_p[sel, slot, None] * expert(flat[sel])
    counts = torch.bincount(top_i.flatten(), minlength=len(ffn.experts))
    return y.view_as(x), counts


@pytest.mark.parametrize("k", [1, 2, 3])
def test_tokens_go_to_their_top_k_experts(k: int) -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(top_k=k))
    ffn = model.blocks[0].ffn
    with torch.no_grad():
        ffn.router.weight.normal_(std=1.0)  # decisive routing
        x = torch.randn(2, 16, 64)
        y, aux = ffn(x)
        ref, counts = _reference(ffn, x, k)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(ffn.last_expert_counts.long(), counts)
    assert int(counts.sum()) == 2 * 16 * k and aux.ndim == 0


def test_paper_top8_of_many_experts_runs() -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(n_experts=16, top_k=8))
    idx = torch.randint(0, 256, (2, 8))
    out = model(idx, idx)
    assert torch.isfinite(out.loss)
    assert int(model.blocks[0].ffn.last_expert_counts.sum()) == 2 * 8 * 8


def test_loss_adds_the_aux_loss_times_its_coefficient() -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(preset="tiny-moe", moe=dict(n_experts=4, top_k=2,
                                                                d_expert=32, aux_loss_coef=0.5)))
    idx = torch.randint(0, 256, (2, 12))
    out = model(idx, idx)
    assert out.aux_loss.item() > 0
    torch.testing.assert_close(out.loss, out.ce_loss + 0.5 * out.aux_loss)
    # two MoE layers: the aux loss is their sum
    parts = []
    for b in model.blocks:
        b.ffn.register_forward_hook(lambda _m, _i, o: parts.append(o[1]))
    out = model(idx, idx)
    torch.testing.assert_close(out.aux_loss, parts[0] + parts[1])


def test_aux_loss_has_gradients_for_the_router() -> None:
    torch.manual_seed(0)
    model = build_model(_cfg())
    idx = torch.randint(0, 256, (2, 12))
    model(idx).aux_loss.backward()
    for b in model.blocks:
        assert b.ffn.router.weight.grad is not None and b.ffn.router.weight.grad.abs().sum() > 0


def test_gradients_reach_exactly_the_selected_experts() -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(n_experts=16, top_k=1))
    ffn = model.blocks[0].ffn
    with torch.no_grad():
        ffn.router.weight.normal_(std=1.0)
    x = torch.randn(1, 3, 64)  # 3 tokens, top-1: at most 3 of 16 experts used
    y, _ = ffn(x)
    y.sum().backward()
    used = ffn.last_expert_counts > 0
    grads = torch.stack([e.down.weight.grad.abs().sum() if e.down.weight.grad is not None
                         else torch.tensor(0.0) for e in ffn.experts])
    assert torch.equal(grads > 0, used) and 1 <= int(used.sum()) <= 3


def test_capacity_drops_tokens_beyond_capacity() -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(n_experts=4, top_k=1, cap=0.25))
    ffn = model.blocks[0].ffn
    with torch.no_grad():
        ffn.router.weight.zero_()
        ffn.router.weight[0].fill_(1.0)  # positive-sum inputs all prefer expert 0
        x = torch.rand(1, 64, 64)
        y, _ = ffn(x)
    # capacity = max(ceil(64/4 * 0.25), MIN_CAPACITY=4) = 4: 60 tokens are dropped (zero out)
    kept = (y.abs().sum(-1) > 0).sum()
    assert int(kept) == 4


def test_param_groups_mark_the_experts_for_deepspeed() -> None:
    model = build_model(_cfg())
    groups = model.param_groups(0.1)
    moe = [g for g in groups if g.get("moe")]
    expert_ids = {id(p) for b in model.blocks for p in b.ffn.experts.parameters()}
    assert moe and {id(p) for g in moe for p in g["params"]} == expert_ids
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))


# Run in a fresh process: this worker's group may already exist. The child reports the store
# under the default group's prefixes: a HashStore lives in the process, a TCPStore on a port.
_PORTLESS = """
import os
from contract.config import ModelConfig
from trainer.model import build_model
import torch.distributed as tdist
from torch.distributed import distributed_c10d
build_model(ModelConfig(**{cfg!r}))
store = distributed_c10d._get_default_store()
while isinstance(store, tdist.PrefixStore):
    store = store.underlying_store
print(tdist.get_world_size(), tdist.get_rank(), tdist.get_backend(), type(store).__name__,
      "MASTER_PORT" in os.environ)
"""


def test_moe_build_initialises_a_single_process_group_that_opens_no_port() -> None:
    """A run without a launcher gets a one-rank gloo group over an in-process store: no port is
    read as free and bound later, so concurrent runs on one machine cannot collide on one (a CI
    run lost a trial to EADDRINUSE when the port it had read was taken before torch bound it).
    Gloo's own listener binds port 0 itself, which the kernel serves without a race."""
    import os
    import subprocess
    import sys

    from orchestrator.run.env import LAUNCHER_VARS

    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    res = subprocess.run([sys.executable, "-c", _PORTLESS.format(cfg=_cfg().model_dump())],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "1 0 gloo HashStore False"


def test_moe_is_causal_when_nothing_is_dropped() -> None:
    # capacity >= tokens * k: routing is per token, so the past cannot see the future
    torch.manual_seed(0)
    model = build_model(_cfg(gates=[{"position": "G1"}]))
    idx = torch.randint(0, 256, (2, 16))
    alt = idx.clone()
    alt[:, 10:] = 5
    torch.testing.assert_close(model(idx).logits[:, :10], model(alt).logits[:, :10])


def test_top1_accepts_batches_smaller_than_the_minimum_capacity() -> None:
    torch.manual_seed(0)
    model = build_model(_cfg(top_k=1))
    out = model(torch.randint(0, 256, (1, 2)))  # 2 tokens < MIN_CAPACITY
    assert torch.isfinite(out.logits).all()
