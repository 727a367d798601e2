"""AnalysisMixin on a real results DB (SQLite, and PostgreSQL where marked): leaderboard
with CIs and verdicts, findings, ablation_table, effects, stability, baseline."""

from __future__ import annotations

import math
import statistics

import pytest

import results_db
from results_db.analysis.stats import delta_ci, seeds_needed
from results_db.schema.vocab import VERDICTS, verdict_kind
from tests.support.synth import add_finished_run, gate_config

G1 = [{"position": "G1"}]
G1_HEAD = [{"position": "G1", "granularity": "headwise"}]
# variant -> (gates, val/ppl per seed 0, 1, 2...)
PPL = {"baseline": ([], [20.0, 21.0, 22.0]),
       "sdpa_elementwise": (G1, [18.0, 18.5, 19.0]),
       "sdpa_headwise": (G1_HEAD, [19.0, 19.4]),
       "value_g2": ([{"position": "G2"}], [20.9]),
       "sdpa_silu": ([{"position": "G1", "activation": "silu"}], [20.0, 21.02, 21.98])}
CONTRACT = ["rank", "variant", "lr"]
STATS = ["n", "mean", "std", "is_baseline", "delta", "delta_pct", "ci_low", "ci_high",
         "ci_low_pct", "ci_high_pct", "ci_method", "verdict", "seeds_needed"]


@pytest.fixture
def db(db_url: str):
    with results_db.open(db_url) as d:
        yield d


def _fill(db, sweep: str = "tbl") -> None:
    sid = db.ensure_sweep(sweep)
    for variant, (gates, ppls) in PPL.items():
        for seed, ppl in enumerate(ppls):
            add_finished_run(db, sid, variant, seed,
                             gate_config(gates, seed=seed),
                             summaries={"val/ppl": ppl, "val/loss": math.log(ppl)})
    add_finished_run(db, sid, "sdpa_headwise", 9,
                     gate_config(G1_HEAD, seed=9), status="diverged",
                     summaries={"val/ppl": float("nan"), "stability/diverged": 1.0})


def test_leaderboard_columns_cis_and_verdicts(db) -> None:
    _fill(db)
    lb = db.leaderboard("tbl")
    varying = lb.columns[3:lb.columns.index("n")]
    assert lb.columns[:3] == CONTRACT and lb.columns[3 + len(varying):][:len(STATS)] == STATS
    assert set(varying) == {"gate_position", "gate_granularity", "gate_activation"}
    rows = {r["variant"]: r for r in lb.iter_rows(named=True)}
    assert lb["variant"][0] == "sdpa_elementwise" and lb["rank"][0] == 1
    base = rows["baseline"]
    assert (base["verdict"], base["delta"], base["ci_method"]) == ("baseline", 0.0, "none")
    # paired (same seeds 0-2): CI of -2.5 is -2.5 +- t(.975, 2) * 0.5 / sqrt(3) -> better
    el = rows["sdpa_elementwise"]
    assert el["ci_method"] == "paired" and el["verdict"] == "better"
    assert (el["ci_low"], el["ci_high"]) == pytest.approx((-3.742069, -1.257931), abs=1e-6)
    assert el["ci_low_pct"] == pytest.approx(100 * el["ci_low"] / 21.0)
    assert el["delta_pct"] == pytest.approx(100 * -2.5 / 21.0)
    # seeds 0-1 vs 0-2: Welch, CI contains 0 and is far wider than 1 % -> needs more seeds
    hw = rows["sdpa_headwise"]
    ci = delta_ci([19.0, 19.4], [20.0, 21.0, 22.0])
    assert hw["ci_method"] == "welch" and (hw["ci_low"], hw["ci_high"]) == \
        pytest.approx((ci.low, ci.high))
    k = seeds_needed(math.sqrt((statistics.variance([19.0, 19.4]) + 1.0) / 2) / 21.0)
    assert hw["seeds_needed"] == k and hw["verdict"] == f"needs >= {k} seeds"
    assert hw["n"] == 2 and hw["n_diverged"] == 1
    assert rows["value_g2"]["verdict"] == "n = 1" and rows["value_g2"]["ci_low"] is None
    # paired differences (0, 0.02, -0.02): sd 0.02, CI +-0.0497 inside +-1 % of 21 = 0.21
    assert rows["sdpa_silu"]["verdict"] == "within noise"
    assert all(verdict_kind(v) in VERDICTS for v in lb["verdict"])


def test_findings_say_it_in_words(db) -> None:
    _fill(db)
    text = db.findings("tbl").lines()[1]  # one LR: the same-LR question only
    assert "1 of 4 variants better (sdpa_elementwise -11.90 % [95 % CI -17.82, -5.99])" in text
    assert all(f"; 1 {kind}" in text for kind in ("needing more seeds", "within noise", "n = 1"))
    assert text.endswith("[95 % CI per row, no correction over the 3 rows with a CI].")
    only = db.ensure_sweep("only-baseline")
    for seed in (0, 1):
        add_finished_run(db, only, "baseline", seed, gate_config(seed=seed),
                         summaries={"val/ppl": 10.0 + seed})
    assert db.findings("only-baseline").lines()[1] == (
        "Only the baseline 'baseline' has a val/ppl value so far: nothing to compare with it "
        "yet.")


def test_higher_is_better_flips_rank_and_verdict(db) -> None:
    _fill(db)
    lb = db.leaderboard("tbl", ascending=False)
    assert lb["variant"][0] == "baseline"
    assert lb.filter(variant="sdpa_elementwise")["verdict"][0] == "worse"


def test_baseline_rule_through_the_db_with_alternatives_declared_first(db) -> None:
    sid = db.ensure_sweep("nobase")
    variants = [("switch_v", gate_config(switch_head={"targets": "v", "n_experts": 2})),
                ("kv_heads_x2", gate_config(n_kv_head=2, n_head=4)),
                ("sdpa_elementwise", gate_config(G1)), ("plain", gate_config())]
    # n_kv_head 2 vs the others' 4: an alternative, not the reference
    for name, cfg in variants:
        add_finished_run(db, sid, name, 0, cfg, summaries={"val/ppl": 10.0})
    assert db.baseline("nobase") == "plain"
    lb = db.leaderboard("nobase")
    assert lb.filter(is_baseline=True)["variant"].to_list() == ["plain"]
    assert set(lb["baseline"]) == {"plain"}


def test_baseline_rule_through_the_db_passes_over_sparse_attention(db) -> None:
    sid = db.ensure_sweep("nsa")
    nsa = {"compress_block": 16, "compress_stride": 8, "select_block": 16, "select_top_n": 3,
           "window": 32}
    # parameter-matched: NSA's rows come out smaller than the dense one (a narrower FFN)
    for name, combine in (("nsa_gated", "gated"), ("nsa_equal", "equal"), ("dense", None)):
        extra = {"nsa": {**nsa, "combine": combine}} if combine else {}
        add_finished_run(db, sid, name, 0, gate_config(param_match=True, **extra),
                         summaries={"val/ppl": 10.0})
    params = dict(db.runs(sweep="nsa").select("variant", "params_total").iter_rows())
    assert params["nsa_equal"] < params["dense"]
    assert db.baseline("nsa") == "dense"


def test_lr_axis_compares_at_the_same_lr(db) -> None:
    sid = db.ensure_sweep("lrs")
    loss = {("baseline", 1e-3): (3.0, 3.1), ("baseline", 3e-3): (2.8, 2.9),
            ("gated", 1e-3): (2.9, 3.0), ("gated", 3e-3): (2.7, 2.8),
            ("gated", 1e-2): (2.6, 2.7)}  # the baseline never ran 1e-2
    for (v, lr), vals in loss.items():
        for seed, x in enumerate(vals):
            add_finished_run(db, sid, v, seed,
                             gate_config([] if v == "baseline" else G1, lr=lr, seed=seed),
                             summaries={"val/loss": x})
    lb = db.leaderboard("lrs", "val/loss")
    rows = {(r["variant"], r["lr"]): r for r in lb.iter_rows(named=True)}
    assert lb.height == 5 and "lr" in lb.columns
    assert rows["gated", 1e-3]["delta"] == pytest.approx(-0.1)  # vs 3.05, not 2.85
    assert rows["gated", 3e-3]["delta"] == pytest.approx(-0.1)
    assert rows["gated", 3e-3]["ci_method"] == "paired"
    assert rows["gated", 1e-2]["delta"] is None and rows["gated", 1e-2]["verdict"] == "no data"
    assert rows["baseline", 3e-3]["is_baseline"] and rows["baseline", 3e-3]["delta"] == 0.0


def test_effects_are_main_effects_over_the_other_dimension(db) -> None:
    sid = db.ensure_sweep("fact")
    # delta % vs baseline 10.0 by construction: G1 -4/-2, G2 -1/+1 (elementwise/headwise)
    ppl = {("G1", "elementwise"): 9.6, ("G1", "headwise"): 9.8,
           ("G2", "elementwise"): 9.9, ("G2", "headwise"): 10.1}
    for seed, jitter in enumerate((-0.01, 0.01)):
        add_finished_run(db, sid, "baseline", seed,
                         gate_config(seed=seed), summaries={"val/ppl": 10.0 + jitter})
        for (pos, gran), p in ppl.items():
            add_finished_run(db, sid, f"{pos}_{gran}", seed,
                             gate_config([{"position": pos, "granularity": gran}], seed=seed),
                             summaries={"val/ppl": p + jitter})
    eff = db.effects("fact")
    assert eff.columns == ["dimension", "value", "lr", "n_variants", "n_runs",
                           "mean_delta_pct", "ci_low_pct", "ci_high_pct", "verdict", "df",
                           "context", "metric", "n_seeds", "paired"]
    rows = {(r["dimension"], r["value"]): r for r in eff.iter_rows(named=True)}
    assert set(rows) == {("gate_position", "G1"), ("gate_position", "G2"),
                         ("gate_granularity", "elementwise"), ("gate_granularity", "headwise")}
    g1 = rows["gate_position", "G1"]
    assert (g1["n_variants"], g1["n_runs"], g1["lr"], g1["context"]) == (2, 4, 3e-3,
                                                                         "lr 0.003")
    # the rest of the condition: the metric, two seeds per level, blocked by seed
    assert (g1["metric"], g1["n_seeds"], g1["paired"]) == ("val/ppl", 2, True)
    assert g1["mean_delta_pct"] == pytest.approx(-3.0)  # balanced: mean of -4 % and -2 %
    # OLS over 10 runs, rank 5 (intercept, G1/G2/no gate, elementwise/headwise/the
    # baseline's cell -- one column with "no gate" --, seed): 5 residual df, not the
    # t-interval over two rows (1 df). The seed jitter is shared, so the fit is exact.
    assert g1["df"] == 5.0
    assert (g1["ci_low_pct"], g1["ci_high_pct"]) == pytest.approx((-3.0, -3.0))
    assert g1["verdict"] == "better"
    assert rows["gate_granularity", "elementwise"]["mean_delta_pct"] == pytest.approx(-2.5)
    assert db.effects_summary("fact").startswith(
        "Main effects on val/ppl (OLS over the runs, 95 % CI), at lr 0.003: "
        "gate_position=G1 better -3.00 % [-3.00, -3.00]")


def test_ablation_table_has_ci_and_verdict_per_metric(db) -> None:
    _fill(db)
    t = db.ablation_table("tbl", metrics=("val/ppl", "val/loss"))
    assert t["variant"][0] == "baseline"
    el = t.filter(variant="sdpa_elementwise").row(0, named=True)
    lb = db.leaderboard("tbl").filter(variant="sdpa_elementwise").row(0, named=True)
    for c in ("mean", "std", "delta", "ci_low", "ci_high", "verdict", "seeds_needed"):
        assert el[f"val/ppl:{c}"] == lb[c]  # one rule: the same numbers as the leaderboard
    assert el["val/ppl:text"] == "18.5 ± 0.5" and el["val/loss:verdict"] == "better"
    assert el["n"] == 3 and "max_stable_lr" not in t.columns


def test_stability_through_the_db(db) -> None:
    sid = db.ensure_sweep("ladder")
    ppl = {("baseline", 4e-3): 2.47, ("baseline", 3.2e-2): 8.6,
           ("gated", 4e-3): 2.47, ("gated", 3.2e-2): 6.6}
    for (v, lr), p in ppl.items():
        add_finished_run(db, sid, v, 0,
                         gate_config([] if v == "baseline" else G1, lr=lr),
                         summaries={"val/loss": math.log(p), "stability/loss_spikes": 0.0,
                                    "probe/max_activation": 77e3 if v == "baseline" else 49e3})
    st = db.stability("ladder")
    assert st is not None and st.summary["variant"].to_list() == ["gated", "baseline"]
    assert st.curve.columns[:2] == ["lr_group_key", "variant"]
    assert {"variant", "lr", "n", "mean", "std", "ci_low", "ci_high", "rel_to_best",
            "max_activation", "loss_spikes", "diverged", "stable"} <= set(st.curve.columns)
    assert st.curve.filter(lr=3.2e-2)["degraded"].to_list() == [True, True]
    assert db.max_stable_lr("ladder")["max_stable_lr"].to_list() == [4e-3, 4e-3]
    t = db.ablation_table("ladder", metrics=("val/loss",))
    assert t["max_stable_lr"].to_list() == [4e-3] * 4
    _fill(db, "single")
    assert db.stability("single") is None  # one learning rate: no curve to speak of


def test_empty_sweep_and_bad_arguments(db) -> None:
    assert db.leaderboard("nope").height == 0 and db.stability("nope") is None
    assert db.findings("nope").lines()[1] == "No finished runs with a val/ppl value yet."
    _fill(db)
    with pytest.raises(ValueError, match="states: 'done' is not a run status"):
        db.leaderboard("tbl", states=("done",))
    with pytest.raises(ValueError, match="min_effect"):
        db.leaderboard("tbl", min_effect=0.0)
    # a wider min_effect turns "needs more seeds" into "within noise" only when the CI fits
    lb = db.leaderboard("tbl", min_effect=0.5)
    assert lb.filter(variant="sdpa_headwise")["verdict"][0] == "within noise"
