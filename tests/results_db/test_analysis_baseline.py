"""THE baseline rule (results_db/analysis/baseline.py) on the sweeps that make it hard: no variant
named `baseline`, SwitchHead/MoE/more-heads variants declared first, an LR axis."""

from __future__ import annotations

from typing import Any

import polars as pl

from results_db.analysis.baseline import pick_baseline


def _runs(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """One run per row, ids in declaration order; unset columns are the plain model's."""
    plain = {"n_gates": 0, "gate_position": None, "nonlinearity": "none", "switch_head": None,
             "nsa": None, "norm_style": "pre", "clip_residual": None, "n_head": 8, "n_kv_head": 2,
             "moe_experts": None, "params_total": 1000}
    return pl.DataFrame([{"id": i + 1, **plain, **r} for i, r in enumerate(rows)],
                        infer_schema_length=None)


def test_named_baseline_wins() -> None:
    runs = _runs([{"variant": "plain"}, {"variant": "baseline", "params_total": 5000}])
    assert pick_baseline(runs) == "baseline"


def test_plain_model_when_alternatives_are_declared_first() -> None:
    # the dashboard's old rule took the first ungated variant: kv_heads_x2 / switch_v here
    runs = _runs([
        {"variant": "switch_v", "switch_head": "v", "params_total": 900},
        {"variant": "kv_heads_x2", "n_kv_head": 4, "params_total": 1100},
        {"variant": "more_experts", "moe_experts": 8, "params_total": 800},
        {"variant": "heads_x2", "n_head": 16, "params_total": 1200},
        {"variant": "sdpa_rmsnorm", "nonlinearity": "rmsnorm"},
        {"variant": "sandwich", "norm_style": "sandwich"},
        {"variant": "clipped", "clip_residual": 10.0},
        {"variant": "sdpa_elementwise", "n_gates": 1, "gate_position": "G1", "params_total": 1100},
        {"variant": "sdpa_headwise", "n_gates": 1, "gate_position": "G1", "params_total": 1010},
        {"variant": "plain"},
    ])
    assert pick_baseline(runs) == "plain"


def test_native_sparse_attention_is_not_the_plain_model() -> None:
    # sweeps/nsa.yaml without a row named baseline: parameter matching leaves an NSA row
    # smaller than the dense one and declared first; its branches replace dense attention
    runs = _runs([{"variant": "nsa_equal", "nsa": "equal", "params_total": 990},
                  {"variant": "nsa_gated", "nsa": "gated", "params_total": 995},
                  {"variant": "dense_g1", "n_gates": 1, "gate_position": "G1"},
                  {"variant": "dense"}])
    assert pick_baseline(runs) == "dense"
    assert pick_baseline(runs.filter(pl.col("variant").str.starts_with("nsa"))) is None


def test_common_architecture_is_the_majority_even_when_alternatives_are_smaller() -> None:
    # fewer experts would have fewer params; still most variants use none (dense)
    runs = _runs([{"variant": "moe4", "moe_experts": 4, "params_total": 500},
                  {"variant": "dense"},
                  {"variant": "g1", "n_gates": 1, "gate_position": "G1"},
                  {"variant": "g2", "n_gates": 1, "gate_position": "G2"}])
    assert pick_baseline(runs) == "dense"


def test_fewest_params_then_declared_first() -> None:
    runs = _runs([{"variant": "b", "params_total": 1000}, {"variant": "a", "params_total": 900},
                  {"variant": "c", "params_total": 900}])
    assert pick_baseline(runs) == "a"
    tie = _runs([{"variant": "z"}, {"variant": "y"}])
    assert pick_baseline(tie) == "z"  # same params: the one declared first


def test_lr_axis_and_seeds_do_not_change_the_pick() -> None:
    rows = []
    for lr in (1e-3, 3e-3, 1e-2):
        for seed in (0, 1):
            rows += [{"variant": "switch_v", "switch_head": "v", "lr": lr, "seed": seed},
                     {"variant": "g1", "n_gates": 1, "gate_position": "G1", "lr": lr},
                     {"variant": "plain", "lr": lr, "seed": seed}]
    assert pick_baseline(_runs(rows)) == "plain"


def test_no_plain_model_no_baseline() -> None:
    runs = _runs([{"variant": "g1", "n_gates": 1, "gate_position": "G1"},
                  {"variant": "switch_v", "switch_head": "v"}])
    assert pick_baseline(runs) is None
    assert pick_baseline(pl.DataFrame({"variant": []})) is None


def test_dashboard_frames_without_n_gates_use_gate_position() -> None:
    runs = _runs([{"variant": "g1", "gate_position": "G1"}, {"variant": "plain"}]).drop("n_gates")
    assert pick_baseline(runs) == "plain"
