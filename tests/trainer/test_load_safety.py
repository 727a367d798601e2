"""trainer/load.py reads checkpoints weights-only: a checkpoint that names code to run is
refused, and running it never happens; real DeepSpeed-layout state still loads."""

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


# ---- resume (trainer.checkpoint.load): DeepSpeed's own load unpickles with weights_only=False
def _engine(zero_stage: int, seed: int) -> object:
    from contract.config import RunSpec
    from trainer.dist import ensure_single_process_dist
    from trainer.engine import Precision, build_engine
    from trainer.model import build_model

    ensure_single_process_dist()
    spec = RunSpec(name="ws", model={"preset": "tiny"},
                   train={"batch_size": 2, "seq_len": 8, "zero_stage": zero_stage})
    torch.manual_seed(seed)
    eng = build_engine(build_model(spec.model), spec, Precision("fp32", ""))
    x = torch.randint(256, (2, 8))
    eng.backward(eng(x, x).loss)
    eng.step()
    return eng


@pytest.fixture(scope="module")
def zero1_pair() -> tuple[object, object]:
    return _engine(1, 0), _engine(1, 1)


def test_resume_reads_a_real_zero1_checkpoint_weights_only(zero1_pair, tmp_path: Path) -> None:
    """ZeRO 1's optimizer file pickles DeepSpeed's LossScaler/ZeroStageEnum/fragment_address:
    allowed by name, so a genuine checkpoint still resumes exactly."""
    from trainer import checkpoint

    a, b = zero1_pair
    checkpoint.save(a, tmp_path, 4, {"gatesweep": {"step": 4, "rng": torch.get_rng_state()}})
    step, client = checkpoint.load(b, tmp_path)
    assert step == 4 and client["gatesweep"]["step"] == 4
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))
    assert b.checkpoint_engine.__class__.__name__ != "_WeightsOnly"  # restored after the load


def test_resume_refuses_a_planted_checkpoint_and_runs_nothing(zero1_pair, tmp_path: Path) -> None:
    """A resuming run unpickled its checkpoint fully; a planted model-states file
    ran its payload. Now it is refused like a damaged file, and the payload never runs."""
    from trainer import checkpoint

    a, b = zero1_pair
    path = checkpoint.save(a, tmp_path, 6, {"gatesweep": {"step": 6}})
    marker = tmp_path / "code-ran"
    for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        state = torch.load(path / name, map_location="cpu", weights_only=False)
        state["planted"] = _Payload(marker)
        torch.save(state, path / name)
    with pytest.raises(ValueError, match="refusing to unpickle"):
        checkpoint.load(b, tmp_path)
    assert not marker.exists()


def test_zero3_gathering_is_gated(tmp_path: Path) -> None:
    """zero_to_fp32 unpickles fully: a partition file that names code is refused before it."""
    marker = tmp_path / "code-ran"
    torch.save({"x": _Payload(marker)}, tmp_path / "zero_pp_rank_0_mp_rank_00_model_states.pt")
    with pytest.raises(ValueError, match="refusing to unpickle"):
        checkpoint_state_dict(tmp_path)
    assert not marker.exists()
