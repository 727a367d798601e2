"""benchmarks/gpu_check.sh must not rot: its CPU smoke mode runs here, with DeepSpeed and Ray
made unimportable (the GPU box it is written for has torch only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two bash + torch subprocesses, ~18 s

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_cpu_smoke_without_deepspeed_or_ray(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    for mod in ("deepspeed", "ray"):
        (blocked / f"{mod}.py").write_text(f"raise ImportError('{mod} is not installed here')\n")
    out = tmp_path / "figures.json"
    env = {**os.environ, "GPU_CHECK_CPU_SMOKE": "1", "PYTHON": sys.executable,
           "PYTHONPATH": str(blocked)}
    res = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--json", str(out)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "G1-elem gate overhead:" in res.stdout and "tokens/s" in res.stdout
    figs = {f["variant"]: f for f in json.loads(out.read_text())}
    assert set(figs) == {"baseline", "G1-elem", "G1-head"}
    for f in figs.values():
        assert f["tokens_per_s"] > 0 and f["loss_last"] < f["loss_first"]
        assert 0 < f["first_token_attention"] < 1 and f["max_activation"] > 0
        assert f["mfu"] is None  # no peak is known for a CPU
    assert figs["baseline"]["gate_score_mean"] is None
    for gated in ("G1-elem", "G1-head"):
        assert 0 < figs[gated]["gate_score_mean"] < 1
    # elementwise adds a score per channel, headwise one per head
    assert figs["G1-elem"]["params"] > figs["G1-head"]["params"] > figs["baseline"]["params"]


def test_gpu_check_refuses_without_cuda_unless_smoke() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GPU_CHECK_CPU_SMOKE"}
    env["PYTHON"] = sys.executable
    res = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no CUDA device" in res.stderr
