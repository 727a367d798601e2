"""LR stability (results_db/analysis/stability.py): the degradation rule, divergence and
spike counts, max activation, and a measured H200 LR ladder."""

from __future__ import annotations

import math
from typing import Any

import polars as pl
import pytest

from results_db.analysis.stability import analyse

COLS = ("val/loss", "stability/diverged", "stability/loss_spikes", "probe/max_activation")


def _runs(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    """rows: (variant, lr, seed, status, val/loss, spikes, max_activation)."""
    out = []
    for i, (variant, lr, seed, status, loss, spikes, act) in enumerate(rows):
        out.append({"run_id": i + 1, "variant": variant, "lr": lr, "lr_group_key": variant,
                    "seed": seed, "status": status, "val/loss": loss,
                    "stability/diverged": 1.0 if status == "diverged" else 0.0,
                    "stability/loss_spikes": spikes, "probe/max_activation": act})
    return pl.DataFrame(out, schema_overrides={c: pl.Float64 for c in COLS})


def test_a_measured_gpu_ladder_degraded_without_spikes_is_told_apart() -> None:
    # A measured ladder, H200, 600 steps: best PPL 2.47 for both at 4e-3; at 3.2e-2 the
    # baseline ends at PPL 8.6 and the gated model at 6.6, no spike, no divergence, max
    # activations 77k vs 49k.
    ppl = {("baseline", 4e-3): 2.47, ("baseline", 3.2e-2): 8.6,
           ("gated", 4e-3): 2.47, ("gated", 3.2e-2): 6.6}
    act = {("baseline", 4e-3): 9e3, ("baseline", 3.2e-2): 77e3,
           ("gated", 4e-3): 8e3, ("gated", 3.2e-2): 49e3}
    rows = [(v, lr, s, "succeeded", math.log(p), 0.0, act[v, lr])
            for (v, lr), p in ppl.items() for s in (0, 1)]
    st = analyse(_runs(rows), "val/loss", tol=0.05)
    top = {r["variant"]: r for r in st.curve.filter(pl.col("lr") == 3.2e-2).iter_rows(named=True)}
    for v in ("baseline", "gated"):  # caught although nothing spiked or diverged
        assert top[v]["diverged"] == 0 and top[v]["loss_spikes"] == 0
        assert top[v]["degraded"] and not top[v]["stable"]
    # rel_to_best = ln(8.6) / ln(2.47) - 1 = 2.151762 / 0.904218 - 1 = 1.379698;
    # gated: ln(6.6) / ln(2.47) - 1 = 1.887070 / 0.904218 - 1 = 1.086963
    assert top["baseline"]["rel_to_best"] == pytest.approx(1.379698, abs=1e-5)
    assert top["gated"]["rel_to_best"] == pytest.approx(1.086963, abs=1e-5)
    assert (top["baseline"]["max_activation"], top["gated"]["max_activation"]) == (77e3, 49e3)
    summary = st.summary
    assert summary["variant"].to_list() == ["gated", "baseline"]  # the more stable first
    assert summary["max_stable_lr"].to_list() == [4e-3, 4e-3]  # both: what the runs support
    assert summary["rel_at_top_lr"].to_list() == pytest.approx([1.086963, 1.379698], abs=1e-5)
    # with a PPL reading the same order holds: 6.6/2.47 - 1 = 1.672 vs 8.6/2.47 - 1 = 2.482
    assert "5%" in st.rule and "best" in st.rule


def test_intermediate_lrs_separate_max_stable_lr() -> None:
    # the same ladder with the doubling LRs in between (4e-3 ... 3.2e-2): the gated model
    # stays within 5 % of its best loss up to 1.6e-2, the baseline only at 4e-3
    ppl = {"baseline": (2.47, 2.62, 3.5, 8.6), "gated": (2.47, 2.49, 2.55, 6.6)}
    lrs = (4e-3, 8e-3, 1.6e-2, 3.2e-2)
    rows = [(v, lr, 0, "succeeded", math.log(p), 0.0, None)
            for v, ps in ppl.items() for lr, p in zip(lrs, ps, strict=True)]
    s = {r["variant"]: r for r in analyse(_runs(rows)).summary.iter_rows(named=True)}
    # baseline 8e-3: ln 2.62 = 0.963174 > ln 2.47 x 1.05 = 0.949429 -> degraded
    # gated 1.6e-2: ln 2.55 = 0.936093 <= 0.949429 -> stable
    assert s["baseline"]["max_stable_lr"] == 4e-3 and s["gated"]["max_stable_lr"] == 1.6e-2
    assert s["gated"]["value_at_max"] == pytest.approx(math.log(2.55))


def test_divergence_spikes_and_a_lucky_lr_above_a_failure() -> None:
    rows = [("v", 1e-3, 0, "succeeded", 3.00, 0.0, 10.0),
            ("v", 1e-3, 1, "succeeded", 3.02, 1.0, 12.0),
            ("v", 3e-3, 0, "succeeded", 3.05, 2.0, 30.0),
            ("v", 3e-3, 1, "diverged", None, 5.0, 900.0),  # one seed diverged -> LR unstable
            ("v", 1e-2, 0, "succeeded", 3.03, 0.0, 40.0)]  # fine, but above a failure
    st = analyse(_runs(rows))
    curve = {r["lr"]: r for r in st.curve.iter_rows(named=True)}
    assert curve[1e-3]["mean"] == pytest.approx(3.01) and curve[1e-3]["n"] == 2
    assert curve[1e-3]["std"] == pytest.approx(math.sqrt(2e-4))
    assert curve[3e-3]["diverged"] == 1 and curve[3e-3]["loss_spikes"] == 7.0
    assert curve[3e-3]["mean"] == pytest.approx(3.05)  # the diverged seed is not averaged
    assert curve[3e-3]["max_activation"] == 900.0 and not curve[3e-3]["stable"]
    assert curve[1e-2]["stable"]
    s = st.summary.row(0, named=True)
    assert (s["best_lr"], s["max_stable_lr"]) == (1e-3, 1e-3)  # 1e-2 sits above a failure
    assert s["min_diverged_lr"] == 3e-3 and s["n_lrs"] == 3 and s["rel_at_top_lr"] == \
        pytest.approx(3.03 / 3.01 - 1)


def test_contiguity_from_the_best_lr() -> None:
    rows = [("v", 1e-3, 0, "succeeded", 3.00, 0.0, None),
            ("v", 3e-3, 0, "succeeded", 3.40, 0.0, None),  # 13 % worse: degraded
            ("v", 1e-2, 0, "succeeded", 3.10, 0.0, None)]  # 3 % worse: within tol, but lucky
    s = analyse(_runs(rows)).summary.row(0, named=True)
    assert s["best_lr"] == 1e-3 and s["max_stable_lr"] == 1e-3
    # a looser tolerance accepts 3e-3 (3.40 <= 3.00 x 1.15), so the ladder reaches 1e-2
    assert analyse(_runs(rows), tol=0.15).summary["max_stable_lr"][0] == 1e-2


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="tol"):
        analyse(_runs([]), tol=-0.1)
    with pytest.raises(ValueError, match="higher-is-better"):
        analyse(_runs([]), metric="bench/hellaswag")
