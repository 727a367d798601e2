"""max_stable_lr on hand-built LR ladders, and its column in the ablation table."""

from __future__ import annotations

import pytest

import results_db
from results_db.schema.dims import group_keys
from tests.support.synth import add_finished_run, gate_config

G1 = [{"position": "G1"}]
# (variant, gates, lr, seed, status, val/loss)
LADDER = [
    # baseline: 1e-3 best; 3e-3 8% worse (beyond 5%); 1e-2 diverges in one seed of two
    ("baseline", [], 1e-3, 0, "succeeded", 3.00), ("baseline", [], 1e-3, 1, "succeeded", 3.02),
    ("baseline", [], 3e-3, 0, "succeeded", 3.25), ("baseline", [], 3e-3, 1, "succeeded", 3.27),
    ("baseline", [], 1e-2, 0, "succeeded", 3.05), ("baseline", [], 1e-2, 1, "diverged", None),
    # gated: stable up to 1e-2 (within 5% of its best at 3e-3); 3e-2 diverges
    ("gated", G1, 1e-3, 0, "succeeded", 3.05), ("gated", G1, 3e-3, 0, "succeeded", 2.90),
    ("gated", G1, 1e-2, 0, "succeeded", 3.00), ("gated", G1, 3e-2, 0, "diverged", None),
]


@pytest.fixture
def db(db_url: str):
    with results_db.open(db_url) as d:
        sid = d.ensure_sweep("lr")
        for variant, gates, lr, seed, status, loss in LADDER:
            summ = {"val/loss": float("nan") if loss is None else loss,
                    "stability/diverged": 1.0 if status == "diverged" else 0.0}
            add_finished_run(d, sid, variant, seed,
                             gate_config(gates, lr=lr, seed=seed), status=status,
                             summaries=summ)
        yield d


def test_lr_group_key_ignores_lr_and_seed_only() -> None:
    a = group_keys(gate_config(lr=1e-3, seed=0))
    b = group_keys(gate_config(lr=3e-2, seed=5))
    c = group_keys(gate_config(G1, lr=1e-3, seed=0))
    assert a[1] == b[1] and a[0] != b[0]  # same ladder, different replicate groups
    assert a[1] != c[1]  # another variant is another ladder
    assert group_keys(gate_config(lr=1e-3, seed=0))[0] == group_keys(gate_config(seed=3,
                                                                                lr=1e-3))[0]


def test_max_stable_lr(db) -> None:
    df = db.max_stable_lr("lr")
    rows = {r["variant"]: r for r in df.iter_rows(named=True)}
    base, gated = rows["baseline"], rows["gated"]
    # baseline: 1e-2 has a diverged seed; 3e-3 is 8% worse than 1e-3 -> only 1e-3 is stable
    assert base["max_stable_lr"] == pytest.approx(1e-3)
    assert base["min_diverged_lr"] == pytest.approx(1e-2) and base["n_lrs"] == 3
    assert base["best_lr"] == pytest.approx(1e-3)
    assert base["value_at_max"] == pytest.approx(3.01)
    assert gated["max_stable_lr"] == pytest.approx(1e-2)  # 3.00 <= 2.90 * 1.05
    assert gated["min_diverged_lr"] == pytest.approx(3e-2)
    assert gated["lrs"] == pytest.approx([1e-3, 3e-3, 1e-2, 3e-2])


def test_max_stable_lr_tolerance(db) -> None:
    loose = {r["variant"]: r["max_stable_lr"]
             for r in db.max_stable_lr("lr", tolerance=0.10).iter_rows(named=True)}
    assert loose["baseline"] == pytest.approx(3e-3)  # 8% worse is inside 10%
    strict = {r["variant"]: r["max_stable_lr"]
              for r in db.max_stable_lr("lr", tolerance=0.0).iter_rows(named=True)}
    assert strict["gated"] == pytest.approx(3e-3)  # only the best LR itself
    with pytest.raises(ValueError, match="relative fraction"):
        db.max_stable_lr("lr", tolerance=-1)


def test_ablation_table_has_max_stable_lr_with_an_lr_axis(db) -> None:
    t = db.ablation_table("lr", metrics=("val/loss",))
    assert t.height == 7  # one row per (variant, lr): 3 baseline + 4 gated
    msl = {(r["variant"], r["lr"]): r["max_stable_lr"] for r in t.iter_rows(named=True)}
    assert msl[("baseline", 3e-3)] == pytest.approx(1e-3)
    assert msl[("gated", 1e-3)] == pytest.approx(1e-2)
    div = {(r["variant"], r["lr"]): r["n_diverged"] for r in t.iter_rows(named=True)}
    assert div[("gated", 3e-2)] == 1 and div[("baseline", 1e-2)] == 1
