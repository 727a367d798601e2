"""Golden test (docs/architecture.md, "Training-run decisions"): a tiny deterministic CPU
run's loss trajectory, pinned.

The run: preset ``tiny`` with a G1 gate, synthetic data, seed 0, fp32, 20 steps of batch 4 x 32,
one torch thread (``resources.cpus: 1``), log every step; once per init scheme. Its per-step
``train/loss`` and final ``val/loss`` are stored in tests/trainer/golden/tiny_g1_20steps.json
(``model.init: legacy``, pinned before paired initialisation existed: the legacy scheme still
trains exactly the old run) and tiny_g1_20steps_paired.json (the default). Any change to the
numerics (model, gates, init, data, schedule, optimizer, clipping, loss) moves them and fails
this test, so such a change cannot pass silently.

Tolerance: relative 1e-4 per value. Re-running on one machine is bit-exact; the slack is for
other CPUs and torch builds, whose fp32 kernels (vector widths, reduction orders) round
differently: over 20 steps that drifts by ~1e-6..1e-5, an intended change by far more (a
different init or LR schedule moves step 2 by > 1e-2).

Regenerate after an INTENDED numerics change (say why in the commit message):

    DS_ACCELERATOR=cpu .venv/bin/python tests/trainer/test_golden.py --regenerate [SCHEME]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = Path(__file__).with_name("golden")
GOLDEN = {"legacy": GOLDEN_DIR / "tiny_g1_20steps.json",
          "paired": GOLDEN_DIR / "tiny_g1_20steps_paired.json"}
REL_TOL = 1e-4


def golden_spec(init: str):  # -> RunSpec
    from contract.config import RunSpec

    return RunSpec(name="golden", seed=0,
                   model={"preset": "tiny", "gates": [{"position": "G1"}], "init": init},
                   train={"steps": 20, "batch_size": 4, "seq_len": 32, "warmup": 4,
                          "lr": 3e-3, "precision": "fp32", "log_every": 1, "eval_every": 0,
                          "eval_batches": 2, "checkpoint_every": 0},
                   resources={"cpus": 1})


def trajectory(init: str) -> dict[str, object]:
    from contract import metrics
    from contract.reporter import MemoryReporter
    from trainer.train import train

    rep = MemoryReporter()
    with tempfile.TemporaryDirectory() as ckpt:
        result = train(golden_spec(init), rep, ckpt)
    return {"train_loss": [v for _, v in rep.series(metrics.TRAIN_LOSS)],
            "val_loss": result.summary[metrics.VAL_LOSS]}


@pytest.mark.parametrize("init", sorted(GOLDEN))
def test_tiny_run_matches_the_golden_trajectory(init: str) -> None:
    expected = json.loads(GOLDEN[init].read_text())
    got = trajectory(init)
    assert len(got["train_loss"]) == len(expected["train_loss"]) == 20
    for step, (g, e) in enumerate(zip(got["train_loss"], expected["train_loss"]), start=1):
        assert g == pytest.approx(e, rel=REL_TOL), (
            f"train/loss at step {step} moved: {g} vs golden {e}; if the change is intended, "
            f"regenerate (see this file's docstring)")
    assert got["val_loss"] == pytest.approx(expected["val_loss"], rel=REL_TOL)
    assert expected["train_loss"][-1] < expected["train_loss"][0] - 0.5  # it learned


def regenerate(init: str) -> None:
    import platform

    import torch

    doc = {"about": f"tests/trainer/test_golden.py: the tiny G1 run's per-step train/loss and "
                    f"final val/loss, model.init: {init}",
           "spec": golden_spec(init).model_dump(mode="json"),
           "made_with": f"torch {torch.__version__}, {platform.machine()}",
           **trajectory(init)}
    GOLDEN_DIR.mkdir(exist_ok=True)
    GOLDEN[init].write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {GOLDEN[init]}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] != ["--regenerate"] or not set(sys.argv[2:]) <= set(GOLDEN):
        sys.exit(f"usage: python tests/trainer/test_golden.py --regenerate [{'|'.join(GOLDEN)}]")
    for scheme in sys.argv[2:] or GOLDEN:
        regenerate(scheme)
