"""A results DB with everything a sweep report shows: ``gates-toy`` (sweeps/gates.yaml, 57 runs:
an LR ladder for three variants, seven ablation rows, three seeds), registered by the real
submit path (tests.support.synthdb), every run succeeded with summaries (val/ppl, val/loss,
probes, spikes, cost), training and evaluation curves and a provenance document per attempt.

``mixed=True`` trains the ``sdpa_silu`` runs on another commit with another torch version, so
the sweep compares runs of two code versions. ``seeds`` widens the sweep for the report-size
benchmark (benchmarks/report_size.py: 27 seeds, 513 runs). Made-up numbers: the gated rows are
a few per cent better than the baseline, the loss is U-shaped in the learning rate.

    python -m tests.support.report_db --db sqlite:///report.db [--mixed] [--seeds 27]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import results_db
from contract.provenance import host_provenance
from tests.support import synthdb

GATES = Path(__file__).resolve().parents[2] / "sweeps" / "gates.yaml"
SWEEP = "gates-toy"
OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER_VARIANT = "sdpa_silu"  # trained on OTHER_COMMIT when mixed


def _ppl(variant: str, seed: int, lr: float) -> float:
    gain = {"sdpa_elementwise": 0.94, "sdpa_headwise": 0.96, "sdpa_silu": 0.95}.get(
        variant, 1.0 + 0.002 * (len(variant) % 3))
    u = 1.0 + 0.08 * math.log10(lr / 1e-2) ** 2  # best at 1e-2
    return 8.0 * gain * u * (1 + 0.004 * ((seed * 7 + len(variant)) % 5))


def provenance(commit: str | None = None, torch: str | None = None) -> dict[str, Any]:
    """This machine's provenance document (the CPU trainer's), optionally on another commit
    and torch version."""
    doc = host_provenance(accelerator="cpu", device_model=None, device_count=0, world_size=1,
                          deepspeed_config={"train_micro_batch_size_per_gpu": 8,
                                            "zero_optimization": {"stage": 0}}).to_json()
    if commit is not None:
        doc.update(source="git", git_commit=commit, dirty=False, diff_sha256=None,
                   code_version=commit)
    if torch is not None:
        doc["torch"] = torch
    return doc


def build(url: str, *, mixed: bool = False, seeds: int = 3) -> str:
    """Write the sweep into the DB at ``url`` (created); returns the URL."""
    db = results_db.open(url)
    text = GATES.read_text(encoding="utf-8").replace(
        "seeds: [0, 1, 2]", f"seeds: {list(range(seeds))}")
    here, other = provenance(), provenance(OTHER_COMMIT, torch="2.12.0+cpu")
    for reg in synthdb.register(db, text):
        run = reg.run
        spec = run.spec
        ppl = _ppl(run.variant, run.seed, spec.train.lr)
        loss = math.log(ppl)
        gated = bool(spec.model.gates)
        summaries = {"val/ppl": ppl, "val/loss": loss, "probe/first_token_attention":
                     0.1 if gated else 0.45, "probe/max_activation": 30.0 if gated else 90.0,
                     "stability/loss_spikes": float(spec.train.lr > 0.05),
                     "stability/diverged": 0.0, "cost/wall_s": 12.0 + run.seed,
                     "cost/tokens": float(spec.train.steps * spec.tokens_per_step)}
        if gated:
            summaries["probe/gate_score_mean"] = 0.2
        steps = spec.train.steps
        points = [(s, "train/loss", loss + 3.0 * math.exp(-s / 80)) for s in range(10, steps + 1,
                                                                                    10)]
        points += [(s, name, v) for s in (0, steps // 2, steps)
                   for name, v in (("val/loss", loss + 2.0 * math.exp(-s / 100)),
                                   ("val/ppl", math.exp(loss + 2.0 * math.exp(-s / 100))))]
        doc = other if mixed and run.variant == OTHER_VARIANT else here
        synthdb.play(db, reg.id, "succeeded", host="report", points=points,
                     summaries=summaries, provenance=doc)
    db.close()
    return url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--db", required=True)
    ap.add_argument("--mixed", action="store_true")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    print(build(args.db, mixed=args.mixed, seeds=args.seeds))


if __name__ == "__main__":
    main()
