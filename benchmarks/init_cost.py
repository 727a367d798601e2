"""Start-up cost of paired initialisation: build + init time, legacy vs paired, in one run.

    DS_ACCELERATOR=cpu .venv/bin/python benchmarks/init_cost.py [--repeats 9]

For the `tiny` and `small` presets (baseline and G1 elementwise) on the CPU, and the paper
presets on the meta device (where nothing is drawn), it builds each model ``--repeats`` times
per scheme, the two schemes interleaved so load drifts hit both alike, and prints the median
and the ratio. One torch thread (as a run with ``resources.cpus: 1`` trains).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DS_ACCELERATOR", "cpu")

import torch  # noqa: E402

from contract.config import ModelConfig  # noqa: E402
from trainer.model import build_model  # noqa: E402
from trainer.train import seed_everything  # noqa: E402

CASES = [("tiny", {}, "cpu"), ("tiny", {"gates": [{"position": "G1"}]}, "cpu"),
         ("small", {}, "cpu"), ("small", {"gates": [{"position": "G1"}]}, "cpu"),
         ("paper-dense-1p7b", {}, "meta"), ("paper-moe-15a2b", {"n_layer": 2}, "meta")]


def _build_s(preset: str, over: dict, device: str, init: str) -> float:
    cfg = ModelConfig.model_validate({"preset": preset, **over, "init": init})
    t0 = time.perf_counter()
    seed_everything(0)  # what trainer.train does before the build
    build_model(cfg, device=None if device == "cpu" else device, seed=0)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"# {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, "
          f"{os.cpu_count()} CPUs, torch {torch.__version__}, 1 thread, "
          f"loadavg {Path('/proc/loadavg').read_text().split()[:3]}")
    print("| model | device | legacy (ms) | paired (ms) | paired / legacy |")
    print("|---|---|---:|---:|---:|")
    for preset, over, device in CASES:
        _build_s(preset, over, device, "paired")  # warm-up: imports, allocator
        times: dict[str, list[float]] = {"legacy": [], "paired": []}
        for _ in range(args.repeats):
            for init in times:
                times[init].append(_build_s(preset, over, device, init))
        leg, pai = (statistics.median(times[k]) * 1e3 for k in ("legacy", "paired"))
        label = preset + (" + G1" if "gates" in over else "") + \
            (f" ({over['n_layer']} layers)" if "n_layer" in over else "")
        print(f"| {label} | {device} | {leg:.1f} | {pai:.1f} | {pai / leg:.2f}x |")
    print(f"# loadavg after: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
