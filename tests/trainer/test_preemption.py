"""Graceful preemption (trainer side) and batched host reads (no device sync per step).

SIGTERM to a real training subprocess, and a heartbeat answering False in-process: the run
stops at a step boundary, checkpoints that step, raises ``trainer.Preempted``, and a resumed
run continues the uninterrupted loss trajectory exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

from contract import metrics
from contract.config import RunSpec
from contract.reporter import MemoryReporter
from tests.support.stepfault import failing_at
from trainer.checkpoint import complete_checkpoints
from trainer.preempt import Preempted
from trainer.train import train

ROOT = Path(__file__).resolve().parents[2]
TRAIN = dict(steps=24, batch_size=4, seq_len=32, warmup=4, log_every=1, eval_every=12,
             eval_batches=2, checkpoint_every=8)


def make_spec(**train_kw: object) -> RunSpec:
    return RunSpec(name="p", model={"preset": "tiny", "gates": [{"position": "G1"}]},
                   train={**TRAIN, **train_kw})


def losses(rep: MemoryReporter) -> dict[int, float]:
    return dict(rep.series(metrics.TRAIN_LOSS))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> MemoryReporter:
    rep = MemoryReporter()
    train(make_spec(), rep, tmp_path_factory.mktemp("ref") / "ckpt")
    return rep


class _StopsAfter(MemoryReporter):
    """Answers False to the heartbeat once step ``at`` has been logged."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at = at

    def log(self, step: int, values: Mapping[str, float]) -> None:
        super().log(step, values)
        if step >= self.at and metrics.TRAIN_LOSS in values:
            self.alive = False


def test_a_false_heartbeat_checkpoints_and_resume_is_exact(reference, tmp_path: Path) -> None:
    ckpt, first = tmp_path / "ckpt", _StopsAfter(10)
    with pytest.raises(Preempted) as info:
        train(make_spec(), first, ckpt)
    assert info.value.step == 10 and "heartbeat" in info.value.reason
    assert info.value.checkpoint == ckpt / "step_00000010"
    assert [s for s, _ in complete_checkpoints(ckpt)] == [8, 10]
    assert sorted(losses(first)) == list(range(1, 11))  # stopped at the boundary after 10
    assert ("checkpoint", str(ckpt / "step_00000010")) in first.artifacts

    second = MemoryReporter()
    result = train(make_spec(), second, ckpt)
    assert result.status == "succeeded" and result.summary["train/resumed_from_step"] == 10
    assert sorted(losses(second)) == list(range(11, 25))
    for step, value in losses(second).items():
        assert value == pytest.approx(losses(reference)[step], rel=1e-6, abs=1e-7), step


def test_batched_reads_see_every_step(reference, tmp_path: Path) -> None:
    """log_every 5: one host read per 5 steps, yet the detectors saw all steps."""
    rep, ckpt = MemoryReporter(), tmp_path / "ckpt"
    result = train(make_spec(log_every=5), rep, ckpt)
    ref = losses(reference)
    assert sorted(losses(rep)) == [5, 10, 15, 20, 24]
    assert all(losses(rep)[s] == pytest.approx(ref[s], rel=1e-6) for s in losses(rep))
    norms = dict(reference.series(metrics.TRAIN_GRAD_NORM))
    argmax = max(norms, key=norms.__getitem__)
    assert argmax not in (5, 10, 15, 20, 24)  # else this test could not tell
    assert result.summary[metrics.MAX_GRAD_NORM] == pytest.approx(norms[argmax], rel=1e-6)
    # the spike detector's window in the step-16 checkpoint holds steps 1..16, not 5, 10, 15
    state = torch.load(ckpt / "step_00000016" / "mp_rank_00_model_states.pt",
                       weights_only=False)
    expected = [ref[s] for s in range(1, 17)]
    history = state["gatesweep"]["spikes"]["history"]
    assert history == pytest.approx(expected, rel=1e-6)


CHILD = """
import json, sys, time
from trainer.preempt import Preempted
from trainer.train import train
from contract.config import RunSpec
from contract.reporter import MemoryReporter
from tests.support.stepfault import failing_at

class Slow(MemoryReporter):  # ~40 ms a step, so the parent can signal mid-run
    def heartbeat(self):
        time.sleep(0.04)
        return super().heartbeat()
    def log(self, step, values):
        super().log(step, values)
        if step >= 5:
            open(sys.argv[2], "w").close()  # "training is under way"

spec = RunSpec.model_validate_json(sys.argv[1])
rep = Slow()
try:
    train(spec, rep, sys.argv[3])
    out = {"finished": True}
except Preempted as exc:
    out = {"step": exc.step, "checkpoint": str(exc.checkpoint), "reason": exc.reason,
           "t": time.time(), "last_logged": max(s for s, k, _ in rep.points if k == "train/loss")}
print(json.dumps(out))
"""


def test_sigterm_to_a_training_process_checkpoints_and_resumes_exactly(tmp_path: Path) -> None:
    spec = make_spec(steps=300, warmup=10, eval_every=0, checkpoint_every=0)
    ckpt, marker = tmp_path / "ckpt", tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(var, None)
    child = subprocess.Popen([sys.executable, "-c", CHILD, spec.model_dump_json(), str(marker),
                              str(ckpt)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not marker.exists() and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), child.communicate()[1][-2000:]
    sent = time.time()
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err[-2000:]
    got = json.loads(out.strip().splitlines()[-1])
    assert got["reason"] == "SIGTERM", got
    assert got["t"] - sent < 10  # one step + one checkpoint, not the rest of the run
    step = got["step"]
    assert 5 <= step < 300 and got["last_logged"] == step
    assert [s for s, _ in complete_checkpoints(ckpt)] == [step]
    assert got["checkpoint"] == str(ckpt / f"step_{step:08d}")

    # the resumed run continues the uninterrupted trajectory (compared over 10 more steps)
    uninterrupted, resumed = MemoryReporter(), MemoryReporter()
    # the same spec from scratch; the fault stops this reference after step + 10
    with failing_at(step + 11), pytest.raises(RuntimeError, match="injected failure"):
        train(spec, uninterrupted, tmp_path / "ref")

    class StopAfter10(MemoryReporter):
        def heartbeat(self) -> bool:
            super().heartbeat()
            return max([s for s, _ in self.series(metrics.TRAIN_LOSS)], default=0) < step + 10

    resumed = StopAfter10()
    with pytest.raises(Preempted):
        train(spec, resumed, ckpt)
    ref = losses(uninterrupted)
    assert sorted(losses(resumed)) == list(range(step + 1, step + 11))
    for s, value in losses(resumed).items():
        assert value == pytest.approx(ref[s], rel=1e-6, abs=1e-7), s


def test_train_restores_the_previous_sigterm_handler(tmp_path: Path) -> None:
    def mine(signum: int, frame: object) -> None:  # pragma: no cover - never delivered
        raise AssertionError

    old = signal.signal(signal.SIGTERM, mine)
    try:
        train(make_spec(steps=3, warmup=1, eval_every=0), MemoryReporter(), tmp_path / "c")
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, old)


def test_preempted_pickles_with_its_attributes() -> None:
    import pickle

    exc = pickle.loads(pickle.dumps(Preempted(7, Path("/x/step_00000007"), "SIGTERM")))
    assert (exc.step, exc.checkpoint, exc.reason) == (7, Path("/x/step_00000007"), "SIGTERM")


def test_a_second_sigterm_gets_the_previous_handler() -> None:
    from trainer.preempt import StopRequest, sigterm_stops

    seen: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        stop = StopRequest()
        with sigterm_stops(stop) as installed:
            assert installed
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)  # let the interpreter run the handler
            assert stop.reason == "SIGTERM" and seen == []
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert seen == [signal.SIGTERM]  # the impatient second signal is not swallowed
        os.kill(os.getpid(), signal.SIGTERM)  # after the block: the old handler is back
        time.sleep(0.05)
        assert seen == [signal.SIGTERM, signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)
