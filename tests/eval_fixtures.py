"""Shared by the evaluation tests: a briefly trained model and an isolated HF cache.

Registered in tests/conftest.py's ``pytest_plugins``."""

from __future__ import annotations

import pytest
import torch

from contract.config import RunSpec
from trainer.data import build_data
from trainer.model import build_model


def train_briefly(spec: RunSpec, seed: int = 0) -> torch.nn.Module:
    """``spec.train.steps`` plain AdamW steps on the spec's data (no DeepSpeed): a model that
    has learned something, cheaply. Returned in train mode."""
    torch.manual_seed(seed)
    model = build_model(spec.model)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = build_data(spec)
    for step in range(spec.train.steps):
        x, y = data.train_batch(step)
        loss = model(x, y).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


@pytest.fixture(scope="module")
def isolated_hf_cache(tmp_path_factory: pytest.TempPathFactory):
    """lm-eval loads the JSONL tasks through ``datasets``: keep its cache out of ~/.cache.

    ``datasets`` reads HF_DATASETS_CACHE once at import, so its config is patched too."""
    import datasets.config

    root = tmp_path_factory.mktemp("hf")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HOME", str(root))
        mp.setenv("HF_DATASETS_CACHE", str(root / "datasets"))
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", root / "datasets")
        yield
