"""The delta vs tokens / size / compute (results_db/analysis/scaling.py) against a
hand-computed case, the iso-FLOP reading, and the "cannot judge" answers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import results_db
from contract.config import ModelConfig
from contract.flops import flops_per_token
from contract.params import count
from tests.support.synth import add_finished_run, gate_config

T975_2 = 4.302652729911275  # Student t, 0.975 quantile, 2 df (tables; scipy agrees)
SLOPES = {0: -1.0, 1: -1.2, 2: -1.4}  # per seed: delta % per decade of tokens
STEPS = (100, 200, 400, 800)
TPS = 16 * 128  # tokens per step of gate_config's train section (batch 16 x seq 128 default)
G1 = [{"position": "G1"}]


def _config(name: str, seed: int, n_layer: int, gates: list | None) -> dict:
    cfg = gate_config(gates, seed=seed, n_layer=n_layer)
    cfg["train"].update(steps=800, batch_size=16, seq_len=128)
    return {**cfg, "name": name, "sweep": "scale"}


def _ppl(variant: str, seed: int, n_layer: int, step: int) -> float:
    """Baseline: 10 at every step (so the baseline mean is 10 exactly). Gated: delta % =
    size_shift + SLOPES[seed] * log10(tokens), size_shift -0.5 % per layer."""
    if variant == "baseline":
        return 10.0
    pct = -0.5 * n_layer + SLOPES[seed] * math.log10(step * TPS)
    return 10.0 * (1 + pct / 100)


def _fill(db: results_db.ResultsDB, sweep: str, layers: tuple[int, ...],
          steps: tuple[int, ...] = STEPS) -> None:
    sid = db.ensure_sweep(sweep)
    for variant, gates in (("baseline", None), ("sdpa_elementwise", G1)):
        for n_layer in layers:
            for seed in SLOPES:
                name = f"{variant}-L{n_layer}-s{seed}"
                points = [(0, "val/ppl", 250.0)] + [(s, "val/ppl", _ppl(variant, seed, n_layer, s))
                                                    for s in steps]
                add_finished_run(db, sid, variant, seed,
                                 _config(name, seed, n_layer, gates), points=points,
                                 summaries={"val/ppl": points[-1][2]})


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('scaling') / 'r.db'}"
    with results_db.open(url) as db:
        _fill(db, "scale", (1, 2, 4))
        _fill(db, "flat", (2,))
        _fill(db, "one-point", (2,), steps=(800,))
    return url


def _row(df, **eq):  # type: ignore[no-untyped-def]
    rows = [r for r in df.iter_rows(named=True) if all(r[k] == v for k, v in eq.items())]
    assert len(rows) == 1, (eq, rows)
    return rows[0]


def test_slope_vs_tokens_matches_hand_computed(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("scale")
    r = _row(sc.trends, x="tokens", size="n_layer=2")
    # per-seed least-squares slopes are exactly SLOPES: mean -1.2, sd 0.2, n 3
    half = T975_2 * 0.2 / math.sqrt(3)
    assert r["slope"] == pytest.approx(-1.2, abs=1e-9)
    assert r["slope_ci_low"] == pytest.approx(-1.2 - half, abs=1e-6)
    assert r["slope_ci_high"] == pytest.approx(-1.2 + half, abs=1e-6)
    assert (r["n_points"], r["n_seeds"], r["verdict"]) == (4, 3, "shifts in the variant's favour")
    assert r["x_from"] == 100 * TPS and r["x_to"] == 800 * TPS
    x = math.log10(800 * TPS)
    assert r["delta_pct_to"] == pytest.approx(-1.0 - 1.2 * x, abs=1e-9)
    # the last point's paired CI: d_s = -1 - m_s x, sd 0.2 x
    assert r["ci_low_pct"] == pytest.approx(-1.0 - 1.2 * x - T975_2 * 0.2 * x / math.sqrt(3),
                                            abs=1e-6)
    assert "slope -1.20 pp per decade [-1.70, -0.70] over 3 seeds" in r["sentence"]


def test_points_hold_tokens_flops_and_paired_ci(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("scale")
    pts = sc.points.filter(sc.points["size"] == "n_layer=1")
    assert pts["step"].to_list() == list(STEPS)  # step 0 (no tokens yet) is not a point
    fpt = flops_per_token(ModelConfig.model_validate({**gate_config(G1)["model"],
                                                      "n_layer": 1}), 128).total
    p = _row(pts, step=200)
    assert p["tokens"] == 200 * TPS and p["flops"] == pytest.approx(200 * TPS * fpt)
    x = math.log10(200 * TPS)
    assert p["delta_pct"] == pytest.approx(-0.5 - 1.2 * x, abs=1e-9)
    assert p["ci_high_pct"] - p["delta_pct"] == pytest.approx(T975_2 * 0.2 * x / math.sqrt(3),
                                                               abs=1e-6)
    assert p["n"] == 3 and p["base_mean"] == pytest.approx(10.0)


def test_iso_flop_reads_the_baseline_at_the_variants_compute(url: str) -> None:
    """The baseline is flat at 10 here, so at equal compute the delta equals the plain one
    wherever the baseline's curve reaches the variant's FLOPs (all but the last point)."""
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("scale")
    pts = sc.points.filter(sc.points["size"] == "n_layer=4")
    last = _row(pts, step=800)
    assert last["iso_delta_pct"] is None  # the baseline never ran that much compute
    p = _row(pts, step=400)
    assert p["iso_delta_pct"] == pytest.approx(p["delta_pct"], abs=1e-9)
    iso = _row(sc.trends, x="iso_flops", size="n_layer=4")
    assert iso["delta_pct_to"] == pytest.approx(p["delta_pct"], abs=1e-9)
    assert iso["verdict"] == "better at equal compute"
    base = flops_per_token(ModelConfig.model_validate({**gate_config()["model"], "n_layer": 4}),
                           128).total
    gated = flops_per_token(ModelConfig.model_validate({**gate_config(G1)["model"],
                                                        "n_layer": 4}), 128).total
    assert iso["flops_overhead_pct"] == pytest.approx(100 * (gated / base - 1))
    assert iso["flops_overhead_pct"] > 0  # the gate costs compute


def test_slope_vs_size(url: str) -> None:
    """Across sizes at the last step: delta % = -0.5 n_layer - m_s log10(T); per seed the
    slope vs log10(params) is a least-squares line through three (params, delta) points."""
    import numpy as np

    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("scale")
    params = {n: count(ModelConfig.model_validate({**gate_config(G1)["model"], "n_layer": n}))[0]
              for n in (1, 2, 4)}
    r = _row(sc.trends, x="params")
    xs = np.log10([params[1], params[2], params[4]])
    ys = np.array([-0.5, -1.0, -2.0])  # the seed term is the same at every size: cancels
    xc = xs - xs.mean()
    expected = float((xc * (ys - ys.mean())).sum() / (xc ** 2).sum())
    assert r["slope"] == pytest.approx(expected, abs=1e-9)
    assert r["slope_ci_low"] == pytest.approx(expected, abs=1e-6)  # no seed spread left
    assert r["n_points"] == 3 and r["verdict"] == "shifts in the variant's favour"
    assert _row(sc.trends, x="flops")["n_points"] == 3


def test_no_size_axis_still_gives_delta_vs_tokens(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("flat")
    r = _row(sc.trends, x="tokens")
    assert r["size"] == "all" and r["slope"] == pytest.approx(-1.2)
    assert _row(sc.trends, x="params")["verdict"] == "cannot judge: one model size"


def test_one_evaluation_point_cannot_judge_the_trend(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("one-point")
    r = _row(sc.trends, x="tokens")
    assert r["verdict"] == "cannot judge: one evaluation point"
    assert r["slope"] is None and r["slope_ci_low"] is None
    assert "cannot judge: one evaluation point" in r["sentence"] and "slope" not in r["sentence"]


def test_a_sweep_without_runs_is_empty(tmp_path: Path) -> None:
    with results_db.open(f"sqlite:///{tmp_path / 'e.db'}") as db:
        db.ensure_sweep("nothing")
        sc = db.scaling("nothing")
    assert sc.points.height == 0 and sc.trends.height == 0 and sc.sentences == []


def test_iso_flop_interpolates_the_baseline_in_log_tokens() -> None:
    """Pure frames: baseline b(T) = 10 - log10 T, variant v(T) = 9 - log10 T, the variant
    costs r = 1.25x the FLOPs per token: at equal compute the baseline has seen r T tokens,
    so the iso delta is v(T) - b(rT) = -1 + log10 r, exactly (the interpolation is linear in
    log10 tokens), and null at the last step (the baseline never reached r T there)."""
    import polars as pl

    from results_db.analysis.scaling import scaling

    steps, tps = (1, 2, 4, 8), 1000
    series, runs = [], []
    for run_id, (key, off) in enumerate((("b", 10.0), ("g", 9.0)), start=1):
        runs.append({"run_id": run_id, "group_key": key, "seed": 0, "status": "succeeded"})
        series += [{"run_id": run_id, "step": s, "value": off - math.log10(s * tps)}
                   for s in steps]
    info = pl.DataFrame({"group_key": ["b", "g"], "variant": ["baseline", "gated"],
                         "lr": [1e-3, 1e-3], "n_gates": [0, 1]})
    costs = pl.DataFrame({"group_key": ["b", "g"], "tokens_per_step": [tps, tps],
                          "params": [100, 110], "fpt": [100.0, 125.0]})
    sc = scaling(pl.DataFrame(series), pl.DataFrame(runs), info, costs, "baseline", "val/loss",
                 higher=False, states=("succeeded",))
    pct = sc.points["iso_delta_pct"].to_list()
    expected = [100 * (-1 + math.log10(1.25)) / (10 - math.log10(1.25 * s * tps))
                for s in steps[:-1]]
    assert pct[:-1] == pytest.approx(expected, abs=1e-9) and pct[-1] is None
    assert _row(sc.trends, x="iso_flops")["flops_overhead_pct"] == pytest.approx(25.0)


def test_a_sweep_whose_runs_all_diverged_is_empty(tmp_path: Path) -> None:
    """No succeeded run and no val/ppl point: the metrics read comes back empty with Null-typed
    columns; the answer is an empty Scaling, not a join error (the dashboard's all_diverged
    case)."""
    with results_db.open(f"sqlite:///{tmp_path / 'd.db'}") as db:
        sid = db.ensure_sweep("diverged")
        for variant, gates in (("baseline", None), ("sdpa_elementwise", G1)):
            name = f"{variant}-s0"
            add_finished_run(db, sid, variant, 0, _config(name, 0, 2, gates),
                             status="diverged", points=[(100, "train/loss", float("inf"))])
        sc = db.scaling("diverged")
    assert sc.points.height == 0 and sc.trends.height == 0
