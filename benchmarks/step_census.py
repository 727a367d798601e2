"""Which tensor ops one training step runs: the trainer's DeepSpeed step vs a bare PyTorch loop.

    python benchmarks/step_census.py [--preset tiny] [--runners bare,engine,g1e,g1h]
        [--batch 2] [--seq 32] [--json PATH]

On a GPU every op is at least one kernel launch, a host read (``.item()``, ``float(t)``,
``bool(t)``: all of them are ``aten._local_scalar_dense``) stalls the CPU until the device has
finished everything queued, and a collective costs a communication kernel even on one rank. A
CPU timing hides all three (the CPU *is* the device), so this census counts them instead: the
numbers are the same on every machine, a regression shows on a laptop, and the GPU ratios in
docs/benchmarks.md have an explanation. The step timed is the one trainer_throughput.py times
(``trainer.engine.train_step``), after two warm-up steps (optimizer state exists).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
import trainer_throughput as tt
from torch.utils._python_dispatch import TorchDispatchMode

from trainer.data import build_data
from trainer.dist import ensure_single_process_dist

HOST_READ = "aten._local_scalar_dense.default"
# Bookkeeping that launches no kernel (views and autograd's detach share the storage).
NO_KERNEL = ("aten.view.", "aten.detach.", "aten._unsafe_view.", "aten.t.", "aten.slice.",
             "aten.expand.", "aten.reshape.", "aten.alias.", "aten.as_strided.",
             "aten.transpose.", "aten.unsqueeze.", "aten.squeeze.", "aten.permute.",
             "profiler.", "aten.split.", "aten.select.")


class OpCensus(TorchDispatchMode):
    """Counts every op dispatched while active (nested calls of composite ops included)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))

    def summary(self) -> dict[str, int]:
        kernels = sum(n for op, n in self.ops.items() if not op.startswith(NO_KERNEL))
        return {"ops": sum(self.ops.values()), "kernel_ops": kernels,
                "host_reads": self.ops[HOST_READ],
                "collectives": sum(n for op, n in self.ops.items() if op.startswith("c10d."))}


def census(name: str, args: argparse.Namespace, batches: list) -> OpCensus:
    """Build runner ``name`` the way trainer_throughput.py does, warm it up, count one step."""
    runner = tt.build(name, args, batches, torch.device("cpu"))
    runner.step(0)
    runner.step(1)
    with OpCensus() as counted:
        runner.step(2)
    return counted


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--runners", default="bare,engine,g1e,g1h")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    args.names = [n.strip() for n in args.runners.split(",") if n.strip()]
    eager = [n for n, r in tt.RUNNERS.items() if not r.compile]  # compiled graphs hide their ops
    unknown = [n for n in args.names if n not in eager]
    if unknown:
        ap.error(f"--runners: unknown {unknown}; expected a subset of {','.join(eager)}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    if any(n != "bare" for n in args.names):
        ensure_single_process_dist()
    # (B, T) token batches; the census does not depend on their values
    batches = [build_data(tt.make_spec(args, "bare")).train_batch(i) for i in range(3)]
    counts = {n: census(n, args, batches) for n in args.names}
    doc: dict[str, Any] = {"preset": args.preset, "batch": args.batch, "seq": args.seq,
                           "runners": {n: c.summary() for n, c in counts.items()}}
    if "bare" in counts and "engine" in counts:
        bare, engine = counts["bare"].ops, counts["engine"].ops
        doc["engine_extra_ops"] = {op: engine[op] - bare[op]
                                   for op in sorted(set(bare) | set(engine))
                                   if engine[op] != bare[op]}
    print(f"preset {args.preset}, batch {args.batch} x seq {args.seq}: one step's ops")
    print(f"{'runner':<9}{'ops':>8}{'kernel ops':>12}{'host reads':>12}{'collectives':>13}")
    for n, s in doc["runners"].items():
        print(f"{n:<9}{s['ops']:>8}{s['kernel_ops']:>12}{s['host_reads']:>12}"
              f"{s['collectives']:>13}")
    if "engine_extra_ops" in doc:
        print("\nengine - bare, per op:")
        for op, d in sorted(doc["engine_extra_ops"].items(), key=lambda kv: -abs(kv[1])):
            print(f"  {d:>+5d}  {op}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    return doc


if __name__ == "__main__":
    main()
