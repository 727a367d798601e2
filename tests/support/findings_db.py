"""A sweep with the trap of a learning-rate axis: a variant "better" only where the baseline is
untuned. Registered by the real submit path (tests.support.synthdb), values known by hand.

``untuned-lr`` (model ``tiny``, 400 steps, seeds 0-2, val/ppl):

- ``baseline`` at 3e-3 / 1e-2 / 3e-2: means 7.61 / 7.2 / 10.2 -- tuned at 1e-2, 41.7 % worse at
  3e-2 and 5.7 % worse at 3e-3 (both beyond noise: the paired CIs exclude 0);
- ``gated`` (G1) on the same ladder: 7.4 / 6.8333 / 7.0 -- better than the baseline at 1e-2,
  its own best LR 1e-2, stable up to 3e-2 where the baseline has degraded;
- ``silu_only`` (G1, SiLU) at 3e-2 only: 8.1 -- 20.6 % "better" than the baseline at 3e-2, yet
  12.5 % worse than the tuned baseline: the row that must never be a headline
  "better";
- ``kv_x2`` (twice the KV heads) at 1e-2 only: within a few tenths of the baseline there.

Every run has val/ppl and val/loss summaries and val/ppl, val/loss points at steps 0, 200, 400.

``sizes`` (``build_sizes``): the baseline and ``gated`` at n_layer 1 and 2, one LR (1e-2), seeds
0-2; gated is 2 % better at one layer and 6 % better at two (SIZE_GAIN): a size axis, so the
findings ask the scale question.

    python -m tests.support.findings_db sqlite:///untuned.db
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from tests.support import synthdb

if TYPE_CHECKING:
    from results_db import ResultsDB

SWEEP = "untuned-lr"
LRS = (3e-3, 1e-2, 3e-2)
STEPS = 400
# (variant, lr) -> val/ppl of seeds 0, 1, 2
PPL: dict[tuple[str, float], tuple[float, float, float]] = {
    ("baseline", 3e-3): (7.62, 7.5, 7.71), ("baseline", 1e-2): (7.2, 7.1, 7.3),
    ("baseline", 3e-2): (10.2, 10.3, 10.1),
    ("gated", 3e-3): (7.4, 7.5, 7.3), ("gated", 1e-2): (6.8, 6.75, 6.95),
    ("gated", 3e-2): (7.0, 7.1, 6.9),
    ("silu_only", 3e-2): (8.1, 8.0, 8.2),
    ("kv_x2", 1e-2): (7.22, 7.18, 7.31),
}
SPEC: dict[str, Any] = {
    "name": SWEEP, "description": "a variant better only where the baseline is untuned",
    "base": {"model": {"preset": "tiny"}, "train": {"steps": STEPS, "lr": 1e-2}},
    "variants": {"baseline": {}, "gated": {"gate.position": "G1"},
                 "silu_only": {"gate.position": "G1", "gate.activation": "silu"},
                 "kv_x2": {"model.n_kv_head": 4}},
    "axes": {"train.lr": list(LRS)},
    "exclude": [{"variant": "silu_only", "train.lr": [3e-3, 1e-2]},
                {"variant": "kv_x2", "train.lr": [3e-3, 3e-2]}],
    "seeds": [0, 1, 2],
}


SIZES = "sizes"
SIZE_GAIN = {1: 0.98, 2: 0.94}  # gated's val/ppl over the baseline's, per n_layer
SIZES_SPEC: dict[str, Any] = {
    "name": SIZES, "description": "the gate at two depths",
    "base": {"model": {"preset": "tiny"}, "train": {"steps": STEPS, "lr": 1e-2}},
    "variants": {"baseline": {}, "gated": {"gate.position": "G1"}},
    "axes": {"model.n_layer": [1, 2]}, "seeds": [0, 1, 2],
}


def _play(db: ResultsDB, run_id: int, ppl: float) -> None:
    loss = math.log(ppl)
    points = [(s, name, v) for s in (0, STEPS // 2, STEPS)
              for name, v in (("val/loss", loss + 2.0 * math.exp(-s / 100)),
                              ("val/ppl", math.exp(loss + 2.0 * math.exp(-s / 100))))]
    synthdb.play(db, run_id, summaries={"val/ppl": ppl, "val/loss": loss,
                                        "stability/loss_spikes": 0.0}, points=points)


def build_sizes(db: ResultsDB) -> None:
    """Register and play the ``sizes`` sweep into ``db``."""
    for reg in synthdb.register(db, SIZES_SPEC):
        run = reg.run
        depth = run.spec.model.n_layer
        base = 8.0 - 0.5 * depth + 0.05 * run.seed
        _play(db, reg.id, base * (SIZE_GAIN[depth] if run.variant == "gated" else 1.0)
              * (1 + 0.002 * ((run.seed * 3 + depth) % 3)))


def build(db: ResultsDB) -> None:
    """Register and play the sweep into ``db``."""
    for reg in synthdb.register(db, SPEC):
        run = reg.run
        _play(db, reg.id, PPL[(run.variant, run.spec.train.lr)][run.seed])


def main() -> None:
    import results_db

    db = results_db.open(sys.argv[1])
    build(db)
    db.close()


if __name__ == "__main__":
    main()
