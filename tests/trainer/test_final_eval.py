"""The end-of-run evaluation hook: what spec.eval asks for lands in the reporter."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from contract.config import RunSpec
from contract.reporter import MemoryReporter
from tests.eval_fixtures import train_briefly
from trainer.data import build_data
from trainer.final_eval import run_final_evals, unwrap
from trainer.rope import RopeScaling


def _spec(**eval_cfg: object) -> RunSpec:
    return RunSpec(name="final-eval-test", model={"preset": "tiny"},
                   train={"seq_len": 32, "batch_size": 4, "steps": 10, "warmup": 1},
                   eval=eval_cfg)


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return train_briefly(_spec(), seed=1)


pytestmark = pytest.mark.usefixtures("isolated_hf_cache")


class _EngineLike(torch.nn.Module):
    """Behaves like a DeepSpeed engine where it matters here: the model sits in ``.module``,
    unknown attributes are forwarded to it, and ``eval()`` returns None."""

    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.module, name)

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def eval(self) -> None:  # type: ignore[override]
        self.module.train(False)


def test_benchmarks_and_longctx_land_as_summaries_and_artifacts(model) -> None:
    spec = _spec(benchmarks=[{"task": "gatesweep_tiny_mc", "limit": 4},
                             {"task": "gatesweep_tiny_gen", "limit": 2}],
                 longctx={"factors": [1, 2], "methods": ["none", "yarn"], "batches": 1})
    rep = MemoryReporter()
    model.train()
    out = run_final_evals(_EngineLike(model), spec, None, rep, "cpu")

    assert out == rep.summaries  # everything returned was reported, and nothing else
    assert 0.0 <= out["bench/gatesweep_tiny_mc"] <= 1.0
    assert out["bench/gatesweep_tiny_mc"] == out["bench/gatesweep_tiny_mc/acc"]
    assert out["bench/gatesweep_tiny_gen"] == out["bench/gatesweep_tiny_gen/exact_match"]
    for m in ("none", "yarn"):
        for f in (1, 2):
            assert math.isfinite(out[f"longctx/{m}/{f}x/ppl"])
            assert 0.0 <= out[f"longctx/{m}/{f}x/retrieval_acc"] <= 1.0
    bench_docs = {d["task"]: d for kind, d in rep.artifacts if kind == "benchmark"}
    assert bench_docs["gatesweep_tiny_mc"]["metric"] == "acc"
    assert bench_docs["gatesweep_tiny_mc"]["n_samples"] == 4
    assert bench_docs["gatesweep_tiny_gen"]["metric"] == "exact_match,strip"
    (table,) = [d for kind, d in rep.artifacts if kind == "longctx"]
    assert table["train_len"] == 32 and table["factors"] == [1, 2]
    assert not [a for a in rep.artifacts if a[0] == "eval_error"]
    assert rep.heartbeats >= 4  # one per benchmark and per factor: long evals stay "alive"
    assert model.training and model.rope_scaling is None  # left as found


def test_unavailable_evals_are_recorded_not_fatal(model, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATESWEEP_CACHE", str(tmp_path / "cache"))
    # 160 bytes, half held out: enough for 1x (33 tokens) but not for 8x (257)
    text = tmp_path / "corpus.txt"
    text.write_text("gated attention " * 10)
    (tmp_path / "bad.yaml").write_text(
        "task: missing_data_task\ndataset_path: json\ndataset_kwargs:\n"
        "  data_files: nowhere.jsonl\noutput_type: multiple_choice\ntest_split: train\n"
        "doc_to_text: '{{q}}'\ndoc_to_choice: ['a', 'b']\ndoc_to_target: 0\n")
    spec = _spec(benchmarks=[{"task": "missing_data_task", "include_path": str(tmp_path)},
                             {"task": "gatesweep_tiny_mc", "limit": 2}],
                 longctx={"factors": [1, 8], "methods": ["none"], "batches": 1,
                          "retrieval": False})
    spec = spec.model_copy(update={"data": spec.data.model_copy(
        update={"source": "text", "path": str(text), "val_fraction": 0.5})})
    rep = MemoryReporter()
    out = run_final_evals(model, spec, None, rep, "cpu")
    errors = {(d["eval"], d["name"]): d["error"] for k, d in rep.artifacts if k == "eval_error"}
    assert set(errors) == {("benchmark", "missing_data_task"), ("longctx", "8x")}
    assert "missing_data_task" in errors[("benchmark", "missing_data_task")]
    assert "8x" in errors[("longctx", "8x")]
    # what could run still did
    assert "bench/gatesweep_tiny_mc" in out and "longctx/none/1x/ppl" in out
    assert not any(k.startswith("longctx/none/8x") for k in out)
    assert "longctx/none/1x/retrieval_acc" not in out  # retrieval: false


def test_nothing_asked_nothing_done(model) -> None:
    rep = MemoryReporter()
    model.set_rope_scaling(RopeScaling("linear", 2.0, 32))
    assert run_final_evals(model, _spec(), None, rep, "cpu") == {}
    assert rep.summaries == {} and rep.artifacts == []
    assert model.rope_scaling == RopeScaling("linear", 2.0, 32)
    model.set_rope_scaling(None)


def test_unwrap_finds_the_model_inside_wrappers(model) -> None:
    assert unwrap(_EngineLike(_EngineLike(model))) is model
    assert unwrap(model) is model


# ---------------------------------------------------------------------- checkpoints (slow)
@pytest.mark.slow
@pytest.mark.parametrize("preset,zero", [("tiny", 0), ("tiny", 3), ("tiny-moe", 0)])
def test_model_loaded_from_checkpoint_reproduces_the_runs_val_loss(
        preset: str, zero: int, tmp_path: Path) -> None:
    from trainer.load import load_model_from_checkpoint
    from trainer.train import train

    spec = RunSpec(name="ckpt-load", model={"preset": preset},
                   train={"seq_len": 32, "batch_size": 4, "steps": 6, "warmup": 1,
                          "zero_stage": zero, "eval_every": 0, "eval_batches": 2})
    result = train(spec, MemoryReporter(), tmp_path)
    model = load_model_from_checkpoint(spec, tmp_path)
    assert not model.training
    with torch.no_grad():
        losses = [float(model(x, y).ce_loss) for x, y in build_data(spec).val_batches(2)]
    # the trained weights, not a fresh init: the same val loss the run reported
    assert sum(losses) / len(losses) == pytest.approx(result.summary["val/loss"], rel=1e-5)


def test_loading_without_a_checkpoint_names_the_directory(tmp_path: Path) -> None:
    from trainer.load import load_model_from_checkpoint

    with pytest.raises(FileNotFoundError, match="no complete checkpoint"):
        load_model_from_checkpoint(_spec(), tmp_path)


@pytest.mark.slow
def test_train_reports_final_evals_through_the_deepspeed_engine(tmp_path: Path) -> None:
    from trainer.train import train

    spec = _spec(benchmarks=[{"task": "gatesweep_tiny_mc", "limit": 3}],
                 longctx={"factors": [1, 2], "methods": ["none", "yarn"], "batches": 1})
    spec = spec.model_copy(update={"train": spec.train.model_copy(update={"eval_every": 0})})
    rep = MemoryReporter()
    result = train(spec, rep, tmp_path)
    assert result.status == "succeeded"
    assert not [d for k, d in rep.artifacts if k == "eval_error"]
    for name in ("bench/gatesweep_tiny_mc", "bench/gatesweep_tiny_mc/acc_norm",
                 "longctx/none/2x/ppl", "longctx/yarn/2x/retrieval_acc"):
        assert math.isfinite(result.summary[name]) and rep.summaries[name] == result.summary[name]


@pytest.mark.slow
def test_evaluate_checkpoint_runs_the_requested_tasks_on_a_finished_run(tmp_path: Path) -> None:
    from contract.config import BenchmarkSpec
    from trainer.final_eval import evaluate_checkpoint
    from trainer.train import train

    spec = _spec(longctx={"factors": [1, 2], "methods": ["none", "ntk"], "batches": 1})
    spec = spec.model_copy(update={"train": spec.train.model_copy(update={"eval_every": 0})})
    train(spec, MemoryReporter(), tmp_path)
    rep = MemoryReporter()
    out = evaluate_checkpoint(spec, str(tmp_path), rep,
                              benchmarks=(BenchmarkSpec(task="gatesweep_tiny_mc", limit=3),))
    assert set(out) >= {"bench/gatesweep_tiny_mc", "longctx/ntk/2x/ppl"}
    assert out == rep.summaries and all(math.isfinite(v) for v in out.values())
