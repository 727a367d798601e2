"""The vectorised analysis (compare.py, effects.py, stability.py, tdist.py: every group at once
in polars/numpy) against the scalar definitions in results_db/analysis/stats.py, which
test_analysis_stats.py pins to hand-computed values: same deltas, CIs, methods and seeds_needed
on a table that holds every case (paired, Welch, zero variance, n = 1, a diverged seed, a NaN,
a repeated seed, an LR without a baseline)."""

from __future__ import annotations

import math
import random

import polars as pl
import pytest

from results_db.analysis.compare import compare
from results_db.analysis.effects import main_effects
from results_db.analysis.stats import (
    delta_ci,
    describe,
    seeds_needed,
    seeds_needed_many,
    t_column,
    t_quantile,
    t_quantiles,
)

M = "val/loss"


def _table(seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, list[tuple]]]:
    """runs (run_id, group_key, seed, status, val/loss), info (group_key, variant, lr,
    gate_position) and, per group, its (seed, status, value) rows."""
    rng = random.Random(seed)
    groups: dict[str, tuple[str, float, str | None, list[tuple]]] = {}
    for lr in (1e-3, 3e-3):
        groups[f"base-{lr}"] = ("baseline", lr, None,
                                [(s, "succeeded", 3.0 + rng.gauss(0, 0.02)) for s in range(4)])
        for i in range(12):
            kind = i % 6
            seeds = {0: range(4), 1: range(3), 2: (7, 8), 3: (0,), 4: (0, 0, 1, 2),
                     5: range(4)}[kind]
            rows = [(s, "succeeded", 3.0 - 0.01 * i + rng.gauss(0, 0.03)) for s in seeds]
            if kind == 5:  # one diverged seed, one NaN: neither is a sample
                rows[0] = (0, "diverged", float("nan"))
                rows[1] = (1, "succeeded", float("nan"))
            if i == 7:  # zero variance on an unpaired group
                rows = [(7, "succeeded", 2.9), (8, "succeeded", 2.9)]
            groups[f"v{i}-{lr}"] = (f"v{i}", lr, "G1" if i % 2 else "G2", rows)
    groups["v99-0.01"] = ("v99", 1e-2, "G1", [(0, "succeeded", 2.8), (1, "succeeded", 2.7)])
    runs, info, rid = [], [], 0
    for key, (variant, lr, pos, rows) in groups.items():
        info.append({"group_key": key, "variant": variant, "lr": lr, "gate_position": pos})
        for s, status, v in rows:
            rid += 1
            runs.append({"run_id": rid, "group_key": key, "seed": s, "status": status, M: v})
    return (pl.DataFrame(runs), pl.DataFrame(info),
            {k: g[3] for k, g in groups.items()})


def _ok(rows: list[tuple]) -> tuple[list[int], list[float]]:
    keep = [(s, v) for s, st, v in rows if st == "succeeded" and math.isfinite(v)]
    return [s for s, _ in keep], [v for _, v in keep]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compare_matches_the_scalar_definitions(seed: int) -> None:
    runs, info, rows = _table(seed)
    t = compare(runs, info, M, "baseline")
    assert t["group_key"].to_list() == list(rows)  # declared order
    methods = set()
    for r in t.iter_rows(named=True):
        xs, x = _ok(rows[r["group_key"]])
        d = describe(x)
        assert r["n"] == d.n and r["mean"] == pytest.approx(d.mean)
        assert (r["std"] is None) == (d.std is None)
        if r["variant"] == "baseline":
            assert (r["delta"], r["verdict"], r["seeds_needed"]) == (0.0, "baseline", None)
            continue
        base = f"base-{r['lr']}"
        if base not in rows:
            assert r["delta"] is None and r["verdict"] == "no data"
            continue
        bs, b = _ok(rows[base])
        ci = delta_ci(x, b, xs, bs)
        methods.add(ci.method)
        assert r["ci_method"] == ci.method
        assert r["delta"] == pytest.approx(ci.delta, rel=1e-9, abs=1e-12)
        for col, want in (("ci_low", ci.low), ("ci_high", ci.high)):
            assert (r[col] is None) == (want is None)
            if want is not None:
                assert r[col] == pytest.approx(want, rel=1e-9, abs=1e-12)
        bmean = describe(b).mean
        k = None if ci.spread is None else seeds_needed(ci.spread / abs(bmean),
                                                         paired=ci.method == "paired")
        assert r["seeds_needed"] == k
        assert r["delta_pct"] == pytest.approx(100 * ci.delta / bmean)
        if ci.method == "none":
            assert r["verdict"] == "n = 1"
        elif ci.high < 0:
            assert r["verdict"] == "better"
    assert methods == {"paired", "welch", "none"}
    zero = t.filter(pl.col("group_key") == "v7-0.001").row(0, named=True)
    assert zero["ci_method"] == "welch" and zero["std"] == 0.0


def test_effects_per_lr_context() -> None:
    # every group is at one of two LRs (v99 at a third, without a baseline): one fit per LR,
    # never across them; with all levels seen in several variants, a model estimate each
    runs, info, _ = _table(0)
    t = compare(runs, info, M, "baseline")
    eff = main_effects(t, runs, M, higher=False)
    assert sorted(set(eff["lr"].to_list())) == [1e-3, 3e-3]
    for lr in (1e-3, 3e-3):
        part = eff.filter(pl.col("lr") == lr)
        assert part["value"].to_list() == ["G1", "G2"]
        assert part["n_variants"].to_list() == [6, 6]
        assert all(v in ("better", "worse", "within noise", "inconclusive")
                   for v in part["verdict"])
        low, high = part["ci_low_pct"].to_list(), part["ci_high_pct"].to_list()
        assert all(a <= m <= b for a, m, b in zip(low, part["mean_delta_pct"], high))


def test_vector_quantiles_and_seeds_match_the_scalar_ones() -> None:
    dfs = [1.0, 2.0, 2.5, 7.3, 30.0, 59.9, 60.0, 250.0]
    q = t_quantiles(0.975, dfs)
    for df in dfs:  # one algorithm: the scalar is the vector on one element
        assert q[df] == pytest.approx(t_quantile(0.975, df), rel=1e-12)
    assert t_quantiles(0.025, [3.0])[3.0] == pytest.approx(-t_quantile(0.975, 3.0))
    col = t_column(pl.Series([2.0, None, 7.3, 2.0])).to_list()
    assert col[1] is None and col[0] == col[3] == pytest.approx(t_quantile(0.975, 2.0))
    assert col[2] == pytest.approx(t_quantile(0.975, 7.3))
    rels = [0.0, 0.004, 0.01, 0.02, 0.3, None]
    for paired in (False, True):
        many = seeds_needed_many(pl.Series(rels, dtype=pl.Float64), 0.01,
                                 pl.Series([paired] * len(rels))).to_list()
        assert many == [None if r is None else seeds_needed(r, 0.01, paired=paired)
                        for r in rels]
    assert seeds_needed(0.01, 0.01) == 17 and seeds_needed(0.005, 0.01, paired=True) == 5
