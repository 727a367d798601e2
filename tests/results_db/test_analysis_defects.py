"""Six defects the analysis once had, each on a small synthetic sweep, with the numbers
checked against references computed here: scipy's ttest_rel / ttest_ind(equal_var=False)
confidence intervals and an ordinary least-squares fit written with numpy (one-hot coding,
minimum-norm lstsq: a different parameterisation from results_db's treatment coding, so the
estimable contrasts must agree while the code paths do not).

1. a delta never crosses a learning rate (or another axis), whatever the baseline misses;
2. a baseline mean of 0 never makes a row "within noise";
3. "within noise" needs the CI inside +-min_effect, not many seeds on one side;
4. main effects are OLS estimated marginal means (balanced and unbalanced designs; a level
   seen once is not a main effect);
5. percentages are relative to |baseline mean|; effects print a verdict sentence;
6. stability: readable labels, the change vs the baseline per LR with its CI, max stable LR
   per seed with the seeds' agreement, one sentence; CSV output works.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl
import pytest

import results_db
from results_db.analysis.stats import t_quantile
from tests.support.synth import add_finished_run, gate_config

stats = pytest.importorskip("scipy.stats")

G1 = [{"position": "G1"}]


@pytest.fixture
def db(tmp_path: Any) -> Any:
    with results_db.open(f"sqlite:///{tmp_path / 'r.db'}") as d:
        yield d


def _add(db: Any, sweep: str, variant: str, values: Iterable[float | None], *,
         gates: list[dict[str, Any]] | None = None, lr: float = 3e-3, metric: str = "val/ppl",
         seeds: Iterable[int] | None = None, steps: int | None = None,
         **model: Any) -> None:
    """One seed group: ``values`` per seed (None: the run failed)."""
    sid = db.ensure_sweep(sweep)
    vals = list(values)
    for seed, v in zip(seeds if seeds is not None else range(len(vals)), vals, strict=True):
        cfg = gate_config(gates, lr=lr, seed=seed, **model)
        if steps is not None:
            cfg["train"]["steps"] = steps
        if v is None:
            add_finished_run(db, sid, variant, seed, cfg, status="failed")
        else:
            add_finished_run(db, sid, variant, seed, cfg, summaries={metric: v})


def _rows(board: pl.DataFrame, *keys: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r
            for r in board.iter_rows(named=True)}


# --- 1. deltas never cross an axis ---------------------------------------------------------
def test_a_delta_never_crosses_learning_rates_whatever_the_baseline_misses(db: Any) -> None:
    # the baseline's 3e-1 runs failed (a failed run is no result group); the gated model ran
    # both rates. Today's code compared gated@3e-1 with baseline@3e-3: "+19.9 %, worse".
    _add(db, "lr", "baseline", [3.00, 3.05, 3.10], lr=3e-3)
    _add(db, "lr", "baseline", [None, None, None], lr=3e-1)
    _add(db, "lr", "gated", [2.95, 3.00, 3.05], gates=G1, lr=3e-3)
    _add(db, "lr", "gated", [3.60, 3.66, 3.72], gates=G1, lr=3e-1)
    # a variant that only ever ran another rate has no baseline either
    _add(db, "lr", "hot", [3.5, 3.6, 3.7], gates=[{"position": "G2"}], lr=1e-1)
    rows = _rows(db.leaderboard("lr"), "variant", "lr")
    assert rows["gated", 3e-1]["delta"] is None and rows["gated", 3e-1]["verdict"] == "no data"
    assert rows["hot", 1e-1]["verdict"] == "no data"
    # at the shared rate: the paired delta, as scipy's ttest_rel has it
    ci = stats.ttest_rel([2.95, 3.00, 3.05], [3.00, 3.05, 3.10]).confidence_interval()
    g = rows["gated", 3e-3]
    assert g["ci_method"] == "paired" and g["delta"] == pytest.approx(-0.05)
    assert (g["ci_low"], g["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)


def test_a_delta_never_crosses_another_axis(db: Any) -> None:
    # train.steps swept for the gated variant; the baseline ran 100 steps only
    _add(db, "steps", "baseline", [3.0, 3.1, 3.2], steps=100)
    _add(db, "steps", "gated", [2.9, 3.0, 3.1], gates=G1, steps=100)
    _add(db, "steps", "gated", [2.5, 2.6, 2.7], gates=G1, steps=400)
    rows = _rows(db.leaderboard("steps"), "variant", "steps")
    assert rows["gated", 100]["delta"] == pytest.approx(-0.1)
    assert rows["gated", 400]["verdict"] == "no data"  # not "better" against 100 steps


# --- 2. a zero-mean baseline --------------------------------------------------------------
def test_a_zero_mean_baseline_is_never_within_noise(db: Any) -> None:
    m = "stability/loss_spikes"
    _add(db, "spikes", "baseline", [0.0, 0.0, 0.0], metric=m)
    _add(db, "spikes", "gated", [0.0, 4.0, 8.0], gates=G1, metric=m)
    row = _rows(db.leaderboard("spikes", m), "variant")["gated"]
    ci = stats.ttest_rel([0.0, 4.0, 8.0], [0.0, 0.0, 0.0]).confidence_interval()
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high))  # [-5.9, 13.9]
    assert row["ci_low"] == pytest.approx(-5.936, abs=1e-3)
    assert row["delta_pct"] is None and row["seeds_needed"] is None
    assert row["verdict"] == "inconclusive"  # was "within noise": no relative margin exists
    assert "1 inconclusive" in db.findings("spikes", m).text()


# --- 3. "within noise" from one side's seed count -------------------------------------------
def test_many_variant_seeds_against_two_baseline_seeds_are_not_within_noise(db: Any) -> None:
    rng = random.Random(3)
    base = [10.0, 10.1]
    var = [10.05 + rng.gauss(0, 0.05) for _ in range(10)]
    _add(db, "w", "baseline", base)
    _add(db, "w", "gated", var, gates=G1)
    row = _rows(db.leaderboard("w"), "variant")["gated"]
    ci = stats.ttest_ind(var, base, equal_var=False).confidence_interval()
    assert row["ci_method"] == "welch"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    half_pct = (row["ci_high_pct"] - row["ci_low_pct"]) / 2
    assert half_pct > 4  # +-4.9 %: the power to see 1 % is tiny
    k = row["seeds_needed"]
    assert k is not None and 2 < k <= 10  # today's rule: k <= n (10) -> "within noise"
    assert row["verdict"] == f"needs >= {k} seeds"  # both groups need k: the baseline has 2


def test_within_noise_needs_the_ci_inside_the_margin(db: Any) -> None:
    # paired, tight: differences (0.01, -0.01, 0.0) on a mean of 10 -> CI +-0.025 < 0.1
    _add(db, "tight", "baseline", [10.0, 10.5, 11.0])
    _add(db, "tight", "gated", [10.01, 10.49, 11.0], gates=G1)
    row = _rows(db.leaderboard("tight"), "variant")["gated"]
    margin = 0.01 * 10.5
    assert -margin <= row["ci_low"] < 0 < row["ci_high"] <= margin
    assert row["verdict"] == "within noise"


# --- 5. percentages by |mean| ---------------------------------------------------------------
def test_negative_baseline_mean_keeps_percent_bounds_in_order(db: Any) -> None:
    # a score that is negative (a log-likelihood, higher is better)
    m = "bench/loglik"
    _add(db, "neg", "baseline", [-10.0, -10.2, -10.4], metric=m)
    _add(db, "neg", "gated", [-9.6, -9.85, -10.05], gates=G1, metric=m)
    row = _rows(db.leaderboard("neg", m), "variant")["gated"]
    assert row["delta"] > 0 and row["ci_low"] > 0 and row["verdict"] == "better"
    assert row["ci_low_pct"] < row["delta_pct"] < row["ci_high_pct"]  # was reversed
    assert row["delta_pct"] == pytest.approx(100 * row["delta"] / 10.2)





# --- 4. main effects from a model fit -------------------------------------------------------
def _ols_reference(runs: list[dict[str, Any]], dim: str, others: list[str],
                   level: str) -> tuple[float, float, float]:
    """(estimate, half width, df) of EMM(level) - baseline for the model value ~ C(dim) +
    C(cell) + C(seed), one-hot coded (every level its own column, plus an intercept:
    singular on purpose), min-norm lstsq; EMM over the variant cells and the seeds."""
    def cell(r: dict[str, Any]) -> str:
        return "|".join(str(r[o]) for o in others)

    levels = sorted({str(r[dim]) for r in runs})
    cells = sorted({cell(r) for r in runs})
    seeds = sorted({r["seed"] for r in runs})

    def x(lv: str, c: str, s: int) -> np.ndarray:
        return np.concatenate([[1.0], [lv == v for v in levels], [c == v for v in cells],
                               [s == v for v in seeds]]).astype(float)

    xm = np.array([x(str(r[dim]), cell(r), r["seed"]) for r in runs])
    y = np.array([r["value"] for r in runs])
    beta, *_ = np.linalg.lstsq(xm, y, rcond=None)
    df = len(y) - np.linalg.matrix_rank(xm)
    s2 = float(np.sum((y - xm @ beta) ** 2)) / df
    base = [r for r in runs if r["variant"] == "baseline"]
    var_cells = sorted({cell(r) for r in runs if r["variant"] != "baseline"})
    emm = np.mean([x(level, c, s) for c in var_cells for s in seeds], axis=0)
    ref = np.mean([x(str(base[0][dim]), cell(base[0]), s) for s in seeds], axis=0)
    c = emm - ref
    se = math.sqrt(float(c @ np.linalg.pinv(xm.T @ xm) @ c) * s2)
    return float(c @ beta), t_quantile(0.975, df) * se, float(df)


def _factorial(db: Any, sweep: str, cells: dict[tuple[str, str], float], dim2: str,
               seeds: int, noise: float, rng: random.Random,
               offset_sd: float = 0.05) -> list[dict[str, Any]]:
    """Baseline 10.0 and gated cells (position, dim2 value) -> % effect; seed offsets shared by
    every group (the paired design) plus independent noise. Returns the runs for the
    reference fit."""
    offsets = [rng.gauss(0, offset_sd) for _ in range(seeds)]
    runs = []
    groups = {("baseline", None, None): 0.0, **{("g", p, v): e for (p, v), e in cells.items()}}
    for (kind, pos, val), effect in groups.items():
        variant = "baseline" if kind == "baseline" else f"{pos}_{val}"
        values = [10.0 * (1 + effect / 100) + offsets[s] + rng.gauss(0, noise)
                  for s in range(seeds)]
        gates = None if pos is None else [{"position": pos, dim2: val}]
        _add(db, sweep, variant, values, gates=gates)
        col = "gate_" + dim2
        for s, v in enumerate(values):
            runs.append({"variant": variant, "seed": s, "value": v,
                         "gate_position": pos, col: val})
    return runs


def test_main_effects_unbalanced_design_are_model_means_not_marginal_means(db: Any) -> None:
    # additive truth: G1 -1.0 %, G2 -0.5 %; headwise -0.66 % on top. The cell G2 x headwise is
    # missing. G2's marginal mean is its one row, -0.5 %; its effect averaged over the
    # granularities is -0.5 - 0.66 / 2 = -0.83 %.
    truth = {("G1", "elementwise"): -1.0, ("G1", "headwise"): -1.66,
             ("G2", "elementwise"): -0.5, ("G3", "elementwise"): -0.2,
             ("G3", "headwise"): -0.86}
    rng = random.Random(7)
    _factorial(db, "unbal", truth, "granularity", 3, 0.0, rng, offset_sd=0.0)
    eff = db.effects("unbal")
    rows = _rows(eff, "dimension", "value")
    g2 = rows["gate_position", "G2"]
    assert g2["mean_delta_pct"] == pytest.approx(-0.83, abs=1e-9)
    assert g2["verdict"] == "one variant"  # one configuration is not a main effect
    assert rows["gate_position", "G1"]["mean_delta_pct"] == pytest.approx(-1.33, abs=1e-9)
    # the noisy version against the numpy reference
    runs = _factorial(db, "unbal2", truth, "granularity", 3, 0.01, random.Random(8))
    pct = 100 / abs(np.mean([r["value"] for r in runs if r["variant"] == "baseline"]))
    eff = _rows(db.effects("unbal2"), "dimension", "value")
    others = ["gate_granularity"]
    for value in ("G1", "G2", "G3"):
        est, half, df = _ols_reference(runs, "gate_position", others, value)
        r = eff["gate_position", value]
        # 18 runs - rank 7 (intercept, 3 positions + no gate, 2 granularities + the
        # baseline's cell, 3 seeds; "no gate" and the baseline's cell are one column)
        assert r["df"] == df == 18 - 7
        assert r["mean_delta_pct"] == pytest.approx(pct * est, rel=1e-6, abs=1e-9)
        assert r["ci_low_pct"] == pytest.approx(pct * (est - half), rel=1e-6, abs=1e-9)
        assert r["ci_high_pct"] == pytest.approx(pct * (est + half), rel=1e-6, abs=1e-9)
    assert eff["gate_position", "G1"]["verdict"] == "better"
    est, half, _ = _ols_reference(runs, "gate_granularity", ["gate_position"], "headwise")
    assert eff["gate_granularity", "headwise"]["mean_delta_pct"] == pytest.approx(pct * est)


def test_main_effects_balanced_design_use_the_fit_df(db: Any) -> None:
    # 2 positions x 3 activations, 2 seeds: per level 2-3 rows; a t-interval over those rows
    # has 1-2 df (t = 12.7 for the 3-level factor); the fit has 14 runs - rank 6 = 8.
    truth = {(p, a): e_p + e_a for p, e_p in (("G1", -2.0), ("G2", -1.0))
             for a, e_a in (("sigmoid", 0.0), ("silu", -0.3), ("ns_sigmoid", 0.4))}
    runs = _factorial(db, "bal", truth, "activation", 2, 0.002, random.Random(1))
    pct = 100 / abs(np.mean([r["value"] for r in runs if r["variant"] == "baseline"]))
    eff = db.effects("bal")
    rows = _rows(eff, "dimension", "value")
    assert set(eff["df"].to_list()) == {8.0}
    for value in ("sigmoid", "silu", "ns_sigmoid"):
        r = rows["gate_activation", value]
        est, half, _ = _ols_reference(runs, "gate_activation", ["gate_position"], value)
        assert r["mean_delta_pct"] == pytest.approx(pct * est, rel=1e-6)
        assert (r["ci_high_pct"] - r["ci_low_pct"]) / 2 == pytest.approx(pct * half, rel=1e-6)
        assert pct * half < 0.05  # +-0.05 pp, where the row-wise t-interval could not call it
        assert r["verdict"] == "better" and r["n_variants"] == 2
    # balanced: the model mean is the marginal mean of the two rows' deltas
    lb = _rows(db.leaderboard("bal"), "variant")
    marg = (lb["G1_silu"]["delta_pct"] + lb["G2_silu"]["delta_pct"]) / 2
    assert rows["gate_activation", "silu"]["mean_delta_pct"] == pytest.approx(marg, rel=1e-9)


def test_effects_with_a_negative_baseline_mean_and_the_sentence(db: Any, tmp_path: Any,
                                                                capsys: Any) -> None:
    m = "bench/loglik"  # higher is better, negative
    rng = random.Random(5)
    for variant, gates, shift in (("baseline", None, 0.0),
                                  ("G1_elementwise", [{"position": "G1"}], 0.4),
                                  ("G1_headwise", [{"position": "G1",
                                                    "granularity": "headwise"}], 0.5),
                                  ("G2_elementwise", [{"position": "G2"}], 0.1)):
        _add(db, "negfx", variant, [-10.0 + shift + rng.gauss(0, 0.02),
                                    -10.2 + shift + rng.gauss(0, 0.02),
                                    -10.4 + shift + rng.gauss(0, 0.02)], gates=gates, metric=m)
    rows = _rows(db.effects("negfx", m), "dimension", "value")
    g1 = rows["gate_position", "G1"]
    assert g1["mean_delta_pct"] > 0 and g1["ci_low_pct"] < g1["mean_delta_pct"]
    assert g1["verdict"] == "better"  # higher log-likelihood: better (was inverted)
    from orchestrator.cli.main import main

    text = db.effects_summary("negfx", m)
    assert text.startswith(f"Main effects on {m} (OLS over the runs, 95 % CI), at lr ")
    assert "gate_position=G1 better +" in text and "seen in one variant only" in text
    path = str(tmp_path / "r.db")
    assert main(["effects", "negfx", "--db", path, "--metric", m]) == 0
    assert "gate_position=G1 better" in capsys.readouterr().out.replace("\n", " ")


# --- 6. stability with uncertainty ----------------------------------------------------------
LADDER = {"baseline": {3e-3: 4.6, 1e-2: 4.5, 3e-2: 7.0, 1e-1: 10.9},
          "sdpa_elementwise": {3e-3: 4.62, 1e-2: 4.52, 3e-2: 4.6, 1e-1: 9.6}}


def _ladder(db: Any, sweep: str = "lad") -> dict[tuple[str, float], list[float]]:
    rng = random.Random(11)
    out = {}
    for v, lad in LADDER.items():
        for lr, p in lad.items():
            vals = [math.log(p * (1 + 0.01 * s) * (1 + rng.gauss(0, 0.003))) for s in range(3)]
            out[v, lr] = vals
            _add(db, sweep, v, vals, gates=None if v == "baseline" else G1, lr=lr,
                 metric="val/loss")
    return out


def test_stability_labels_cis_seed_agreement_and_sentence(db: Any) -> None:
    vals = _ladder(db)
    st = db.stability("lad")
    assert st is not None
    assert set(st.summary["label"]) == {"baseline", "sdpa_elementwise"}  # never a hash
    s = _rows(st.summary, "variant")
    assert (s["baseline"]["max_stable_lr"], s["sdpa_elementwise"]["max_stable_lr"]) == \
        (1e-2, 3e-2)
    assert (s["baseline"]["seeds_agree"], s["baseline"]["n_seeds"]) == (3, 3)
    assert s["sdpa_elementwise"]["seed_msls"] == "s0 3e-2, s1 3e-2, s2 3e-2"
    per_seed = st.per_seed.filter(pl.col("variant") == "baseline")
    assert per_seed["max_stable_lr"].to_list() == [1e-2] * 3
    # the change vs the baseline at each LR is the leaderboard's paired CI (scipy ttest_rel)
    curve = _rows(st.curve, "variant", "lr")
    for lr in (3e-3, 1e-2, 3e-2, 1e-1):
        pt = curve["sdpa_elementwise", lr]
        x, b = vals["sdpa_elementwise", lr], vals["baseline", lr]
        ci = stats.ttest_rel(x, b).confidence_interval()
        bmean = abs(sum(b) / 3)
        assert pt["ci_method"] == "paired"
        assert (pt["ci_low_pct"], pt["ci_high_pct"]) == pytest.approx(
            (100 * ci.low / bmean, 100 * ci.high / bmean), rel=1e-9)
    assert curve["sdpa_elementwise", 3e-2]["verdict"] == "better"
    assert st.sentence.startswith(
        "sdpa_elementwise stays within 5 % of its best val/loss up to 3e-2 (3 of 3 seeds "
        "agree), the baseline up to 1e-2 (3 of 3 seeds agree). At 3e-2, where the baseline "
        "has degraded, the change in val/loss vs the baseline (95 % CI): sdpa_elementwise ")


def test_stability_seeds_that_disagree_are_said(db: Any) -> None:
    sid = "split"
    for v, lad in LADDER.items():
        for lr, p in lad.items():
            # seed 2 of the gated model degrades at 3e-2 (7 % above its best)
            vals = [math.log(p * (1.07 if (v != "baseline" and lr == 3e-2 and s == 2)
                                  else 1.0) * (1 + 0.001 * s)) for s in range(3)]
            _add(db, sid, v, vals, gates=None if v == "baseline" else G1, lr=lr,
                 metric="val/loss")
    st = db.stability(sid)
    s = _rows(st.summary, "variant")["sdpa_elementwise"]
    assert s["max_stable_lr"] == 3e-2 and (s["seeds_agree"], s["n_seeds"]) == (2, 3)
    assert (s["seed_msl_min"], s["seed_msl_max"]) == (1e-2, 3e-2)
    assert "up to 3e-2 (2 of 3 seeds agree: s0 3e-2, s1 3e-2, s2 1e-2)" in st.sentence


@pytest.mark.parametrize("fmt", ["csv", "json", "table", "markdown"])
def test_stability_cli_every_format(db: Any, tmp_path: Any, fmt: str, capsys: Any) -> None:
    from orchestrator.cli.main import main

    _ladder(db)
    path = str(tmp_path / "r.db")
    for extra in ([], ["--curve"]):
        assert main(["stability", "lad", "--db", path, "--format", fmt, *extra]) == 0
        got = capsys.readouterr()
        if fmt == "csv":  # the lrs list column used to crash polars' CSV writer
            lines = got.out.splitlines()
            assert lines[0].startswith("label,variant,")
            assert "3e-3 1e-2 3e-2 1e-1" in got.out or extra
            assert "3 of 3 seeds agree" in got.err
        elif fmt == "json":
            doc = json.loads(got.out)
            assert "3 of 3 seeds agree" in doc["summary"]
            assert doc["rows"][0]["label"] in ("baseline", "sdpa_elementwise")
        else:
            text = got.out.replace("\n", " ")
            assert "seeds agree" in " ".join(text.split())
            assert "lr_group_key" not in text
