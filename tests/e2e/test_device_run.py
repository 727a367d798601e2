"""benchmarks/device_run.sh (the one GPU session's script) in its CPU smoke mode: every step
writes its output, the sweep hook fills a results DB without Ray, a failing step loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "device_run.sh"


def run_script(out: Path, **env: str) -> dict[str, int]:
    full = {**os.environ, "OUT": str(out), "PYTHON": sys.executable,
            "DEVICE_RUN_CPU_SMOKE": "1", **env}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        full.pop(var, None)
    proc = subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    codes = {}
    for line in (out / "summary.txt").read_text().splitlines():
        name, _, rest = line.partition(": ")
        if rest.startswith("rc="):
            codes[name] = int(rest.split()[0].removeprefix("rc="))
    return codes


@pytest.mark.slow
def test_cpu_smoke_writes_every_step_and_the_sweep_db(tmp_path: Path) -> None:
    out = tmp_path / "out"
    codes = run_script(out, DEVICE_SWEEP=str(ROOT / "sweeps" / "smoke.yaml"),
                       DEVICE_SWEEP_STORAGE=str(tmp_path / "runs"))
    assert codes == {"throughput_small": 0, "mfu_1p7b": 0, "sweep": 0}
    small = json.loads((out / "throughput_small.json").read_text())
    assert set(small["runners"]) == {"bare", "engine", "g1e", "g1h"}
    assert all(r["ms_per_step"] > 0 for r in small["runners"].values())
    assert {"engine_vs_bare", "g1e_overhead", "g1h_overhead"} <= set(small["ratios"])
    assert 0 < small["ratios"]["g1h_flop_share"] < small["ratios"]["g1e_flop_share"]
    big = json.loads((out / "mfu_1p7b.json").read_text())
    assert set(big["runners"]) == {"engine", "bare"} and big["mode"] == "sequential"
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and "sweep.db" in files, files  # one file: no -wal/-shm beside it

    import results_db

    db = results_db.open(f"sqlite:///{out / 'sweep.db'}", migrate=False)
    try:
        runs = db.runs(sweep="smoke")
        assert sorted(runs["status"].to_list()) == ["succeeded"] * 3
    finally:
        db.close()


@pytest.mark.slow
def test_a_failing_step_loses_nothing_else(tmp_path: Path) -> None:
    out = tmp_path / "out"
    codes = run_script(out, SMALL_PRESET="no-such-preset")
    assert codes["throughput_small"] != 0 and codes["mfu_1p7b"] == 0
    assert "no-such-preset" in (out / "throughput_small.log").read_text()
    assert json.loads((out / "mfu_1p7b.json").read_text())["runners"]["engine"]["ms_per_step"] > 0
