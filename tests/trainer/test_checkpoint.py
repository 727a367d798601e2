"""trainer/checkpoint.py: atomic publish, rotation, crash mid-save, real-engine round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from contract.config import RunSpec
from trainer import checkpoint
from trainer.dist import ensure_single_process_dist
from trainer.engine import Precision, build_engine
from trainer.model import build_model


def fake_checkpoint(root: Path, step: int, complete: bool = True) -> Path:
    path = root / checkpoint.tag_for(step)
    path.mkdir(parents=True)
    (path / "mp_rank_00_model_states.pt").write_bytes(b"x")
    if complete:
        (path / checkpoint.META).write_text(json.dumps({"step": step}))
    return path


def test_only_complete_checkpoints_count(tmp_path: Path) -> None:
    fake_checkpoint(tmp_path, 10)
    fake_checkpoint(tmp_path, 30, complete=False)  # crashed before the marker
    (tmp_path / ".staging-step_00000040" / "step_00000040").mkdir(parents=True)
    (tmp_path / "step_junk").mkdir()
    assert checkpoint.latest_checkpoint(tmp_path) == (10, tmp_path / "step_00000010")
    assert checkpoint.latest_checkpoint(tmp_path / "absent") is None


def test_prune_keeps_the_newest_two_and_drops_staging(tmp_path: Path) -> None:
    for step in (5, 10, 20, 15):
        fake_checkpoint(tmp_path, step)
    (tmp_path / ".staging-step_00000025").mkdir()
    checkpoint.prune(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000015", "step_00000020"]


def small_engine(seed: int) -> object:
    ensure_single_process_dist()
    spec = RunSpec(name="ck", model={"preset": "tiny"}, train={"batch_size": 2, "seq_len": 8})
    torch.manual_seed(seed)
    return build_engine(build_model(spec.model), spec, Precision("fp32", ""))


def train_one_step(engine: object) -> None:
    x = torch.randint(256, (2, 8))
    out = engine(x, x)
    engine.backward(out.loss)
    engine.step()


@pytest.fixture(scope="module")
def engines() -> tuple[object, object]:
    return small_engine(0), small_engine(1)


def test_round_trip_restores_weights_optimizer_and_client_state(engines, tmp_path: Path) -> None:
    a, b = engines
    train_one_step(a)
    state = {"gatesweep": {"step": 3, "rng": torch.get_rng_state(), "spikes": [1.0, 2.0]}}
    for step in (1, 2, 3):
        checkpoint.save(a, tmp_path, step, state)
    assert [s for s, _ in checkpoint.complete_checkpoints(tmp_path)] == [2, 3]
    assert not list(tmp_path.glob(".staging-*"))
    step, client = checkpoint.load(b, tmp_path)
    assert step == 3 and client["gatesweep"]["spikes"] == [1.0, 2.0]
    assert torch.equal(client["gatesweep"]["rng"], state["gatesweep"]["rng"])
    for pa, pb in zip(a.module.parameters(), b.module.parameters()):
        assert torch.equal(pa, pb)
    exp_a = [s["exp_avg"] for s in a.optimizer.state.values()]
    exp_b = [s["exp_avg"] for s in b.optimizer.state.values()]
    assert len(exp_a) == len(exp_b) > 0
    assert all(torch.equal(x, y) for x, y in zip(exp_a, exp_b))


def test_a_crash_mid_save_never_looks_complete(engines, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    a, _ = engines
    checkpoint.save(a, tmp_path, 5, {"gatesweep": {}})
    real_save = a.save_checkpoint

    def crashing_save(save_dir: str, tag: str, **kw: object) -> None:
        (Path(save_dir) / tag).mkdir(parents=True)
        (Path(save_dir) / tag / "mp_rank_00_model_states.pt").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(a, "save_checkpoint", crashing_save)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(a, tmp_path, 10, {"gatesweep": {}})
    assert checkpoint.latest_checkpoint(tmp_path)[0] == 5
    assert not (tmp_path / "step_00000010").exists()
    monkeypatch.setattr(a, "save_checkpoint", real_save)
    checkpoint.save(a, tmp_path, 10, {"gatesweep": {}})  # the next save cleans up the debris
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_00000005", "step_00000010"]


class _FlushSpy:
    """A buffering reporter: records which checkpoints existed each time it was flushed."""

    def __init__(self, ckpt_dir: Path) -> None:
        from contract.reporter import MemoryReporter

        self.inner, self.ckpt_dir = MemoryReporter(), ckpt_dir
        self.pending: list[int] = []  # steps logged since the last flush
        self.flushes: list[tuple[list[int], set[str]]] = []
        self.checkpoints: list[str] = []

    def log(self, step: int, metrics) -> None:  # type: ignore[no-untyped-def]
        self.pending.append(step)
        self.inner.log(step, metrics)

    def summary(self, metrics) -> None:  # type: ignore[no-untyped-def]
        self.inner.summary(metrics)

    def heartbeat(self) -> None:
        pass

    def artifact(self, kind: str, payload) -> None:  # type: ignore[no-untyped-def]
        if kind == "checkpoint":
            self.checkpoints.append(Path(str(payload)).name)

    def flush(self) -> None:
        existing = ({p.name for p in self.ckpt_dir.glob("step_*")}
                    if self.ckpt_dir.exists() else set())
        self.flushes.append((self.pending, existing))
        self.pending = []


def test_points_are_flushed_before_each_checkpoint_exists(tmp_path: Path) -> None:
    """A crash right after a checkpoint must not lose points logged before it: the resumed
    attempt starts after the checkpoint and never logs them again."""
    from trainer.train import train

    spec = RunSpec(name="flush", model={"preset": "tiny"},
                   train={"steps": 20, "batch_size": 2, "seq_len": 16, "warmup": 2,
                          "log_every": 2, "eval_every": 0, "checkpoint_every": 10})
    spy = _FlushSpy(tmp_path / "ckpt")
    train(spec, spy, tmp_path / "ckpt")
    assert spy.checkpoints == ["step_00000010", "step_00000020"]
    before = [f for f in spy.flushes if f[0]]  # flushes that had points to write
    for ckpt in spy.checkpoints:
        step = int(ckpt.removeprefix("step_"))
        # some flush wrote the points up to this step while the checkpoint did not yet exist
        assert any(max(pts) <= step and step - 2 <= max(pts) and ckpt not in existing
                   for pts, existing in before), (ckpt, spy.flushes)


# ---- careless checkpoint directories -----------------------------------------------------------

def test_check_dir_refuses_a_file_and_another_runs_checkpoints_before_any_engine(
        tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"checkpoint_dir: '.*afile' is a file, not a dir"):
        checkpoint.check_dir(tmp_path / "afile", "f" * 64)
    with pytest.raises(ValueError, match=r"cannot be created: '.*afile' is a file"):
        checkpoint.check_dir(tmp_path / "afile" / "ckpt", "f" * 64)
    ours = fake_checkpoint(tmp_path / "ck", 4)
    (ours / checkpoint.META).write_text(json.dumps({"step": 4, "fingerprint": "a" * 64}))
    checkpoint.check_dir(tmp_path / "ck", "a" * 64)  # the same run: resumable
    checkpoint.check_dir(tmp_path / "new", "a" * 64)  # absent: created by the first save
    with pytest.raises(ValueError, match=r"holds a checkpoint of a different run \(step_0000"
                                         r"0004: its spec fingerprint differs\)"):
        checkpoint.check_dir(tmp_path / "ck", "b" * 64)


def test_the_marker_records_the_fingerprint(engines, tmp_path: Path) -> None:
    a, _ = engines
    path = checkpoint.save(a, tmp_path, 3, {"gatesweep": {}}, fingerprint="c" * 64)
    assert json.loads((path / checkpoint.META).read_text()) == {"step": 3,
                                                                "fingerprint": "c" * 64}


def _damage(path: Path) -> None:
    """Half of the model-state file: what a disk that lost the tail after the save leaves."""
    f = path / "mp_rank_00_model_states.pt"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous(engines, tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture
                                                                ) -> None:
    a, b = engines
    checkpoint.save(a, tmp_path, 2, {"gatesweep": {"step": 2}})
    _damage(checkpoint.save(a, tmp_path, 4, {"gatesweep": {"step": 4}}))
    with caplog.at_level("WARNING", logger="trainer.checkpoint"):
        step, client = checkpoint.load(b, tmp_path)
    assert step == 2 and client["gatesweep"]["step"] == 2
    assert "resumed from step_00000002" in caplog.text and "step_00000004" in caplog.text
    _damage(tmp_path / "step_00000002")
    with pytest.raises(ValueError, match=r"no checkpoint in .* can be loaded \(step_00000004: "
                                         r"\w+: .*; step_00000002: \w+: .*\); move them away"):
        checkpoint.load(b, tmp_path)
