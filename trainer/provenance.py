"""One attempt's provenance (contract/provenance.py) with what only the trainer knows: the
device it trains on and the DeepSpeed config it handed ``deepspeed.initialize``."""

from __future__ import annotations

from typing import Any

import torch

from contract.provenance import Provenance, host_provenance


def collect(engine: Any, world_size: int) -> Provenance:
    """Recorded once per attempt, after the engine exists (its config is the one used)."""
    device = torch.device(engine.device)
    cuda = device.type == "cuda"
    config = engine.config if isinstance(getattr(engine, "config", None), dict) else {}
    return host_provenance(
        accelerator=device.type,
        device_model=torch.cuda.get_device_name(device) if cuda else None,
        device_count=torch.cuda.device_count() if cuda else 0,
        world_size=world_size, deepspeed_config=_jsonable(config))


def _jsonable(value: Any) -> Any:
    """The config as plain JSON values (DeepSpeed may leave enums or dtypes in it)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
