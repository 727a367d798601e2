"""``python -m trainer RUN.yaml [--checkpoint-dir D]``: train one RunSpec without the orchestrator.

The YAML is one RunSpec (name, model: {preset: tiny, ...}, train, data, eval, ...). Metrics are
printed as they arrive and kept in memory; the summary is printed at the end. Exit status: 0
succeeded, 3 diverged, 2 bad input (one clear sentence on stderr naming the file and the key,
no traceback): the spec and its data files are checked before torch starts (trainer/runfile.py),
the real token counts and the checkpoint dir before the engine starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from contract.metrics import TRAIN, VAL
from contract.reporter import MemoryReporter
from contract.states import RunStatus
from trainer.runfile import load_spec


class PrintingReporter(MemoryReporter):
    """MemoryReporter that also prints train/val lines as they are logged."""

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        super().log(step, metrics)
        shown = {k: v for k, v in metrics.items() if k.startswith((TRAIN, VAL))}
        if shown:
            text = "  ".join(f"{k}={v:.4g}" for k, v in sorted(shown.items()))
            print(f"step {step:>6}  {text}", flush=True)

    def artifact(self, kind: str, payload: str | Path | Mapping[str, Any]) -> None:
        super().artifact(kind, payload)
        if kind == "checkpoint":
            print(f"checkpoint {payload}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainer", description=__doc__.splitlines()[0])
    ap.add_argument("spec", type=Path, help="RunSpec YAML file")
    ap.add_argument("--checkpoint-dir", type=Path, default=None,
                    help="where checkpoints go and resume from (default: ./checkpoints/<name>)")
    args = ap.parse_args(argv)
    try:
        spec = load_spec(args.spec)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from trainer.train import train  # torch + deepspeed: only once the spec is valid

    ckpt = args.checkpoint_dir or Path("checkpoints") / spec.name
    reporter = PrintingReporter()
    try:
        result = train(spec, reporter, ckpt)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        # found when the data is opened (real token counts, a trained BPE) or the checkpoint
        # dir is read: still before the engine starts
        print(f"error: {args.spec}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"status": result.status, "steps": result.steps,
                      "summary": result.summary}, indent=1, sort_keys=True))
    return 0 if result.status == RunStatus.SUCCEEDED else 3


if __name__ == "__main__":
    sys.exit(main())
