"""contract/flops.py against the built model: torch's FlopCounterMode over one forward and
backward pass counts exactly 6 N FLOPs per token of matmuls (gates, untied heads included);
it may or may not count the attention scores (torch registers SDPA's CPU kernel or not), so
the difference must be 0 or exactly our attention term."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from contract.config import ModelConfig
from contract.flops import flops_per_token
from trainer.model import build_model


@pytest.mark.parametrize("model", [
    {"preset": "tiny"}, {"preset": "tiny", "gates": [{"position": "G1"}]},
    {"preset": "tiny", "gates": [{"position": "G2", "granularity": "headwise"}]},
    {"preset": "tiny", "tie_embeddings": False, "n_layer": 3},
], ids=["tiny", "g1", "g2_headwise", "untied_3_layers"])
def test_matmul_flops_match_the_built_model(model: dict) -> None:
    cfg = ModelConfig.model_validate(model)
    B, T = 2, 32
    torch.manual_seed(0)
    net = build_model(cfg)
    idx = torch.randint(0, cfg.vocab_size, (B, T))
    with FlopCounterMode(display=False) as counter:
        net(idx, idx).loss.backward()
    ours = flops_per_token(cfg, T)
    counted = counter.get_total_flops()
    assert counted - 6 * ours.matmul_params * B * T in (0, ours.attention * B * T)
