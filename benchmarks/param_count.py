"""Parameter counting for ``validate``: the arithmetic count vs the meta-device model.

    python benchmarks/param_count.py

Prints, side by side, the time per model of ``contract.params`` (arithmetic, no torch) and of
``trainer.meta_params`` (build on the meta device, the test oracle), over the presets x three
gate settings, plus the cost of importing torch and the model code that the oracle needs.
"""

from __future__ import annotations

import os
import platform
import time
from datetime import UTC, datetime

GATES = ([], [{"position": "G1"}], [{"position": "G2", "granularity": "headwise"}])


def main() -> None:
    from contract.config import ModelConfig
    from contract.params import _count
    from contract.presets import PRESETS

    cfgs = [ModelConfig(preset=p, gates=g) for p in PRESETS for g in GATES]
    t0 = time.perf_counter()
    reps = 100
    for _ in range(reps):
        for c in cfgs:
            _count(c)  # uncached: what a new shape costs
    analytic = (time.perf_counter() - t0) / (reps * len(cfgs))
    t0 = time.perf_counter()
    from trainer.meta_params import _count as meta  # imports torch and the model
    imports = time.perf_counter() - t0
    t0 = time.perf_counter()
    for c in cfgs:
        meta(c, "meta")
    oracle = (time.perf_counter() - t0) / len(cfgs)
    print(f"{datetime.now(UTC):%Y-%m-%d} {platform.node()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; {len(cfgs)} models (presets x 3 gate settings)\n")
    print("| | per model | one-off import |")
    print("|---|---|---|")
    print(f"| contract.params (arithmetic) | {analytic * 1e6:.0f} us | none (no torch) |")
    print(f"| meta-device build (oracle) | {oracle * 1e3:.0f} ms | {imports:.1f} s |")
    print(f"\narithmetic is {oracle / analytic:,.0f}x faster per model")


if __name__ == "__main__":
    main()
