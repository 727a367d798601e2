"""The paper-scale sweep files (sweeps/paper/*.yaml) against the paper's own tables.

Shapes and schedules come from table7_architectures.csv (shipped in dashboard/paper_data/), the rows from Tables
1-4; parameter counts are of the real model code on the meta device (no memory)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cluster import NodeResources, check_parallelism, max_concurrent_trials
from orchestrator.submit import make_plan
from trainer.config import ModelConfig
from trainer.params import count_params

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "dashboard" / "paper_data"  # the paper's tables, shipped with the project
MOE = ROOT / "sweeps" / "paper" / "moe_15a2b.yaml"
DENSE = ROOT / "sweeps" / "paper" / "dense_1p7b.yaml"
GPU_NODES = [NodeResources(f"n{i}", f"10.0.0.{i}", 96, 8) for i in range(8)]  # 64 GPUs


def _csv(name: str) -> list[dict[str, str]]:
    with (PAPER / name).open() as fh:
        return list(csv.DictReader(fh))


def _table7(model: str) -> dict[str, str]:
    return next(r for r in _csv("table7_architectures.csv") if r["model"] == model)


def _global_batch(spec) -> int:  # type: ignore[no-untyped-def]
    t = spec.train
    return t.batch_size * t.grad_accum * spec.resources.workers


def _global_experts(m: ModelConfig) -> ModelConfig:
    """The same model counted with every expert (ep_size 1): what the whole job holds."""
    if m.moe is None:
        return m
    return m.model_copy(update={"moe": m.moe.model_copy(update={"ep_size": 1})})


@pytest.fixture(scope="module")
def moe_runs() -> dict[str, object]:
    return {r.variant: r for r in make_plan(MOE).runs}


@pytest.fixture(scope="module")
def dense_runs() -> dict[str, object]:
    return {r.variant: r for r in make_plan(DENSE).runs}


def test_moe_sweep_has_every_row_of_tables_1_3_4(moe_runs: dict) -> None:
    rows = {f"t1r{int(r['#']):02d}" for r in _csv("table1_moe_gating_variants.csv")}
    rows |= {"t3r05", "t3r06", "t3r07", "t4r06", "t4r07"}  # the rows Table 1 lacks
    assert {v.split("_")[0] for v in moe_runs} == rows
    assert len(moe_runs) == 20


def test_moe_shape_and_schedule_match_table7(moe_runs: dict) -> None:
    t7 = _table7("moe-15A2B")
    for run in moe_runs.values():
        m, t = run.spec.model, run.spec.train
        assert t.seq_len == int(t7["seq_len"]) and t.steps == int(t7["steps"])
        assert t.lr == float(t7["max_lr"]) and t.min_lr == float(t7["min_lr"])
        assert t.warmup == int(t7["warmup_steps"])
        assert _global_batch(run.spec) == int(t7["global_batch"])
        assert m.n_layer == int(t7["layers"]) and m.d_model == int(t7["hidden_size"])
        assert m.head_dim == int(t7["head_dim"]) and m.qk_norm and not m.tie_embeddings
        assert m.moe is not None and m.moe.top_k == int(t7["top_k"])
        assert m.moe.d_expert == int(t7["ffn_size"])
        check_parallelism(run.spec)  # ep_size divides the workers (and the experts)
    base = moe_runs["t1r01_baseline"].spec.model
    assert (base.n_head, base.n_kv_head, base.moe.n_experts) == \
        (int(t7["query_heads"]), int(t7["kv_heads"]), int(t7["experts"]))
    assert moe_runs["t1r01_baseline"].spec.tokens_per_step * 100_000 == pytest.approx(419e9,
                                                                                    rel=0.01)


def test_moe_parameter_counts_match_table1(moe_runs: dict) -> None:
    """Total ~15B; each variant's added parameters match Table 1's "Added (M)" column."""
    def total(v: str) -> int:
        return count_params(_global_experts(moe_runs[v].spec.model)).total

    base = total("t1r01_baseline")
    assert 14.5e9 < base < 16e9
    added = {f"t1r{int(r['#']):02d}": float(r["Added (M)"]) * 1e6
             for r in _csv("table1_moe_gating_variants.csv")}
    for variant in moe_runs:
        row = variant.split("_")[0]
        if row not in added or row in ("t1r01", "t1r04"):
            continue  # t1r04: the paper's 400M does not follow from its own shapes (README)
        got = total(variant) - base
        assert got == pytest.approx(added[row], rel=0.05, abs=0.05e6), (variant, got)
    experts4 = total("t1r04_add4_experts") - base
    assert experts4 == pytest.approx(4 * 3 * 2048 * 768 * 24, rel=0.01)


def test_dense_sweep_matches_table2(dense_runs: dict) -> None:
    t2 = _csv("table2_dense.csv")
    assert len(dense_runs) == len(t2) == 14
    settings = {"28L, 400B tok, bsz 1024": (28, 400e9, 1024),
                "28L, 3.5T tok, bsz 2048": (28, 3.5e12, 2048),
                "48L, 400B tok, bsz 1024": (48, 400e9, 1024),
                "48L, 1T tok, bsz 4096": (48, 1e12, 4096)}
    setting = ""
    for row in t2:
        setting = setting if row["Setting"].strip() in ("″", '"') else row["Setting"]
        layers, tokens, batch = settings[setting]
        run = next(r for v, r in dense_runs.items() if v.startswith(f"t2r{int(row['#']):02d}_"))
        spec = run.spec
        assert spec.model.n_layer == layers, row
        assert spec.train.lr == float(row["Max LR"]), row
        assert _global_batch(spec) == batch, row
        assert spec.train.steps * spec.tokens_per_step == pytest.approx(tokens, rel=0.001), row
        gated = "SDPA" in row["Method"]
        assert bool(spec.model.gates) == gated, row
        if "Headwise" in row["Method"]:
            assert spec.model.gates[0].granularity == "headwise"
        assert (spec.model.norm_style == "sandwich") == ("Sandwich" in row["Method"]), row


def test_dense_shapes_match_table7(dense_runs: dict) -> None:
    for model, layers in (("dense-1.7B-28L", 28), ("dense-1.7B-48L", 48)):
        t7 = _table7(model)
        run = next(r for r in dense_runs.values() if r.spec.model.n_layer == layers)
        m = run.spec.model
        assert (m.d_model, m.n_head, m.n_kv_head, m.head_dim, m.d_ff) == tuple(
            int(t7[k]) for k in ("hidden_size", "query_heads", "kv_heads", "head_dim",
                                 "ffn_size"))
        assert m.tie_embeddings and m.qk_norm
        assert 1.6e9 < count_params(m).total < 1.8e9  # "1.7B"


def test_paper_sweeps_fit_a_64_gpu_cluster(moe_runs: dict, dense_runs: dict) -> None:
    moe = [r.spec.resources for r in moe_runs.values()]
    dense = [r.spec.resources for r in dense_runs.values()]
    assert max_concurrent_trials(moe, GPU_NODES) == 1  # 64 GPUs per trial
    assert max_concurrent_trials(dense, GPU_NODES) == 2  # 32 GPUs per trial


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    for path in (MOE, DENSE):
        res = subprocess.run([sys.executable, "-m", "orchestrator", "submit", str(path),
                              "--dry-run", "--no-params", "--db", f"sqlite:///{db}"],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "nothing was written or scheduled" in res.stdout
    assert not db.exists()
