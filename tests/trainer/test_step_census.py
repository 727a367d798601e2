"""The trainer's step launches what a bare PyTorch loop launches, and never waits for the device
(docs/benchmarks.md, "Trainer throughput"). Counted with benchmarks/step_census.py, so it holds
on CPU: every counted op is a kernel launch on a GPU, and every ``_local_scalar_dense`` a host
sync there."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import step_census


@pytest.fixture(scope="module")
def census() -> dict:
    return step_census.main(["--runners", "bare,engine,g1h"])


def test_the_step_never_reads_the_device_back(census: dict) -> None:
    for name, counts in census["runners"].items():
        assert counts["host_reads"] == 0, name  # losses and norms stay on the device


def test_one_rank_runs_no_collective(census: dict) -> None:
    # DeepSpeed would flatten, all-reduce, divide and copy back every gradient on one rank
    assert census["runners"]["engine"]["collectives"] == 0
    assert not any(op.startswith("c10d.") for op in census["engine_extra_ops"])


def test_the_engine_adds_only_its_bookkeeping(census: dict) -> None:
    bare, engine = census["runners"]["bare"], census["runners"]["engine"]
    # the (loss, CE, norm) row (zeros, add, stack, cat, divides) and a second fused AdamW
    # call for the no-decay group: a constant, not a per-parameter cost
    assert engine["kernel_ops"] - bare["kernel_ops"] <= 12
    extra = census["engine_extra_ops"]
    assert extra.get("aten.copy_.default", 0) <= 0 and extra.get("aten.cat.default", 0) <= 1


def test_the_census_counts_what_it_claims() -> None:
    import torch

    with step_census.OpCensus() as counted:
        t = torch.ones(3)
        float(t.sum())  # one host read
        (t * 2).view(3, 1)
    s = counted.summary()
    assert s["host_reads"] == 1 and s["collectives"] == 0
    assert counted.ops["aten.mul.Tensor"] == 1 and s["kernel_ops"] == s["ops"] - 1  # view
