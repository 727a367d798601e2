"""The ``model.nsa`` block (contract/config.py NSAConfig): its defaults, and every bad size
refused at load time with the key and what was expected, against the model alone (strides that
do not tile the blocks) and against train.seq_len (blocks that do not fit the context)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from contract.config import ModelConfig, NSAConfig, RunSpec
from contract.identity import fingerprint


def _spec(nsa: dict[str, Any], seq_len: int = 192) -> RunSpec:
    return RunSpec.model_validate({"name": "n", "model": {"preset": "tiny", "nsa": nsa},
                                   "train": {"seq_len": seq_len}})


def test_defaults_fit_the_cpu_context() -> None:
    nsa = _spec({}).model.nsa
    assert nsa == NSAConfig(compress_block=16, compress_stride=8, select_block=16,
                            select_top_n=4, window=32, combine="gated")
    assert _spec({}, seq_len=64).model.nsa is not None  # 4 selection blocks: top 4 fits


@pytest.mark.parametrize("nsa, message", [
    ({"compress_stride": 5}, "nsa.compress_stride: 5 must divide nsa.compress_block (16); "
                             "expected a divisor of 16"),
    ({"compress_stride": 32}, "nsa.compress_stride: 32 must divide nsa.compress_block"),
    ({"select_block": 12}, "nsa.select_block: 12 must be a multiple of nsa.compress_stride (8)"),
    ({"select_top_n": 0}, "greater than or equal to 1"),
    ({"window": 0}, "greater than or equal to 1"),
    ({"combine": "softmax"}, "'gated', 'learned' or 'equal'"),
    ({"top_n": 4}, "Extra inputs are not permitted"),
])
def test_bad_sizes_are_refused_by_the_model(nsa: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ModelConfig.model_validate({"preset": "tiny", "nsa": nsa})


@pytest.mark.parametrize("nsa, seq_len, message", [
    ({"compress_block": 256, "compress_stride": 8}, 192,
     "model.nsa.compress_block: 256 exceeds train.seq_len (192); expected at most 192"),
    ({"select_block": 256}, 192, "model.nsa.select_block: 256 exceeds train.seq_len (192)"),
    ({"window": 200}, 192, "model.nsa.window: 200 exceeds train.seq_len (192)"),
    ({"select_block": 40}, 192, "model.nsa.select_block: 40 must divide train.seq_len (192); "
                                "expected a divisor of 192"),
    ({"select_top_n": 13}, 192, "model.nsa.select_top_n: 13 exceeds the 12 selection blocks "
                                "of train.seq_len (192); expected 1..12"),
    ({}, 48, "model.nsa.select_top_n: 4 exceeds the 3 selection blocks"),
])
def test_sizes_that_do_not_fit_the_context_are_refused(nsa: dict[str, Any], seq_len: int,
                                                        message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _spec(nsa, seq_len)


def test_a_stored_dense_run_keeps_its_fingerprint() -> None:
    """Runs stored before model.nsa existed have no such key: their fingerprint is the one a
    dense run of today has, and they read back as dense."""
    spec = RunSpec.model_validate({"name": "d", "model": {"preset": "tiny"}})
    stored = spec.model_dump(mode="json")
    del stored["model"]["nsa"]
    assert fingerprint(stored) == spec.fingerprint()
    assert RunSpec.from_stored(stored).model.nsa is None
    assert _spec({}).fingerprint() != spec.fingerprint()
