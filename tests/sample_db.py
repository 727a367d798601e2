"""A small, deterministic results DB for CLI tests: the shipped gates and LR sweeps with two
seeds, written through results_db's API (real SQLite file, real attempts and summaries).

- ``gates-toy`` (sweeps/gates.yaml, seeds 0-2, an LR ladder for three variants): 57 runs, all
  succeeded but ``sdpa_headwise``'s seeds 1 and 2 (failed: one seed per LR);
  ``sdpa_elementwise`` is 3 % better than the baseline, the others within 0.1 %.
- ``lr-stability`` (sweeps/lr_stability.yaml, seeds 0 and 1): 20 runs over a 5-step LR ladder,
  val/loss U-shaped in the LR.
- ``gpu-quick`` and ``gpu-table2-lr`` (sweeps/gpu/, seeds 0 and 1): the GPU recipes' rows with the
  same made-up values, so the README's GPU commands run as printed.
"""

from __future__ import annotations

import math
from pathlib import Path

import results_db
from tests.support import synthdb

SWEEPS = Path(__file__).resolve().parents[1] / "sweeps"
FAILURE = "RuntimeError: sample failure"


def _values(variant: str, seed: int, lr: float) -> dict[str, float]:
    better = {"sdpa_elementwise": 0.97}.get(variant, 1.0 + 0.001 * (len(variant) % 3))
    u = 1.0 + 0.05 * math.log10(lr / 1e-2) ** 2  # best at lr = 1e-2
    ppl = 10.0 * better * u * (1 + 0.001 * seed)
    return {"val/ppl": ppl, "val/loss": math.log(ppl), "probe/max_activation": 50.0 + seed,
            "stability/loss_spikes": 0.0, "probe/first_token_attention": 0.3}


def build(tmp: Path) -> str:
    """Write the sample DB under ``tmp``; returns its URL."""
    url = f"sqlite:///{tmp / 'sample.db'}"
    db = results_db.open(url)
    for name in ("gates.yaml", "lr_stability.yaml", "gpu/quick.yaml", "gpu/table2_lr.yaml"):
        text = (SWEEPS / name).read_text().replace("seeds: [0]", "seeds: [0, 1]")
        for r in synthdb.register(db, text, workdir=tmp):
            run = r.run
            if run.variant == "sdpa_headwise" and run.seed >= 1:
                synthdb.play(db, r.id, "failed", host="sample", error=FAILURE,
                             traceback="Traceback (most recent call last):\nRuntimeError")
                continue
            vals = _values(run.variant, run.seed, run.spec.train.lr)
            synthdb.play(db, r.id, host="sample", summaries=vals,
                         points=[(s, "train/loss", vals["val/loss"] + 1 / s) for s in (10, 20, 30)])
    db.close()
    return url


_TEMPLATE: list[Path] = []  # built once per test process, copied per test


def copy_to(dest: Path) -> str:
    """A fresh copy of the sample DB in ``dest`` (building the template on first use)."""
    import atexit
    import shutil
    import tempfile

    if not _TEMPLATE:
        tmp = Path(tempfile.mkdtemp(prefix="gatesweep-sample-"))
        atexit.register(shutil.rmtree, tmp, True)
        build(tmp)
        _TEMPLATE.append(tmp / "sample.db")
    shutil.copy(_TEMPLATE[0], dest / "sample.db")
    return f"sqlite:///{dest / 'sample.db'}"
