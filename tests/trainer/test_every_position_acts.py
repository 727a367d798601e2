"""Every row of the gate-position table acts in the forward pass (the worked example "add a sixth
gate position" in docs/architecture.md is executable): for each position of
contract/gate_positions.py's TABLE, elementwise and (where it has heads) headwise, the model with
that gate computes something else than the same model with its gate's parameters moved. A row
that validates, is counted and is built but has no line in trainer/attention.py fails here."""

from __future__ import annotations

import pytest
import torch

from contract import gate_positions
from contract.config import ModelConfig
from trainer.attention import Attention
from trainer.model import build_model

CASES = [(p.name, g) for p in gate_positions.TABLE
         for g in (("elementwise", "headwise") if p.has_heads else ("elementwise",))]


def _logits(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(idx).logits


@pytest.mark.parametrize("position, granularity", CASES)
def test_the_gate_changes_the_forward_pass(position: str, granularity: str) -> None:
    cfg = ModelConfig.model_validate({"preset": "tiny", "gates": [
        {"position": position, "granularity": granularity}]})
    model = build_model(cfg, seed=0).eval()
    idx = torch.randint(0, cfg.vocab_size, (2, 16), generator=torch.Generator().manual_seed(1))
    before = _logits(model, idx)
    moved = 0
    with torch.no_grad():
        for attn in (m for m in model.modules() if isinstance(m, Attention)):
            # the gate's own parameters, and the G1 logit rows fused into q_proj
            own = [*attn.gates.parameters()]
            if attn.g1_width:
                own.append(attn.q_proj.weight[attn.q_proj.out_features - attn.g1_width:])
            for p in own:
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
                moved += p.numel()
    assert moved, f"{position}: no gate parameter was built"
    after = _logits(model, idx)
    assert not torch.allclose(before, after, atol=1e-6), \
        f"{position} {granularity}: moving its gate changes nothing: the gate never acts"


def test_the_cases_cover_the_table() -> None:
    assert {p for p, _ in CASES} == set(gate_positions.NAMES)
