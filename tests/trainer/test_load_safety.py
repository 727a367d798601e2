"""trainer/load.py reads checkpoints weights-only: a checkpoint that names code to run is
refused, and running it never happens (issue 12); real DeepSpeed-layout state still loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from trainer.load import MODEL_STATES, checkpoint_state_dict


class _Payload:
    """Unpickling this would call os.mkdir(marker): the side effect proves code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def test_plain_state_loads(tmp_path: Path) -> None:
    w = torch.arange(6, dtype=torch.float16).reshape(2, 3)
    torch.save({"module": {"w": w}, "ds_config": {"zero": 0}, "ds_version": "0.19"},
               tmp_path / MODEL_STATES)
    state = checkpoint_state_dict(tmp_path)
    assert state["w"].dtype == torch.float32 and torch.equal(state["w"], w.float())


def test_a_checkpoint_that_runs_code_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    torch.save({"module": {"w": torch.zeros(1)}, "extra": _Payload(marker)},
               tmp_path / MODEL_STATES)
    with pytest.raises(ValueError, match="refusing to unpickle"):
        checkpoint_state_dict(tmp_path)
    assert not marker.exists()
