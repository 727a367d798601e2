"""End-of-run evaluation: the benchmarks and long-context evals a RunSpec asks for.

The training loop calls ``run_final_evals`` once, on rank 0, after its last step and final
validation. Everything lands as summaries (``bench/...``, ``longctx/...``) through the
reporter; what an evaluation could not do (a built-in lm-eval task without its dataset
offline, a malformed local task, data too short for 8x the training length) is recorded as an
``eval_error`` artifact and logged, without failing a run whose training succeeded or losing
the other evaluations' numbers.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from contract.config import RunSpec
from contract.reporter import Reporter
from trainer.benchmarks import BenchmarkError, iter_benchmarks
from trainer.load import load_model_from_checkpoint
from trainer.longctx import evaluate_longctx

log = logging.getLogger(__name__)


def unwrap(model: nn.Module) -> nn.Module:
    """The GatedLM inside a DeepSpeed engine (or DDP) wrapper.

    Tested on ``.module`` itself: a DeepSpeed engine forwards unknown attributes to its
    module (so it seems to have ``set_rope_scaling``) and its ``eval()`` returns None.
    """
    while isinstance(inner := getattr(model, "module", None), nn.Module):
        model = inner
    return model


def _record_error(reporter: Reporter, kind: str, name: str, exc: BaseException) -> None:
    log.warning("final eval %s %s skipped: %s", kind, name, exc)
    reporter.artifact("eval_error", {"eval": kind, "name": name, "error": str(exc)})


def run_benchmark_evals(model: nn.Module, spec: RunSpec, tokenizer: Any, reporter: Reporter,
                        device: str) -> dict[str, float]:
    """``spec.eval.benchmarks`` -> ``bench/<task>[/<metric>]`` summaries (+ artifacts)."""
    out: dict[str, float] = {}
    try:
        for bench, res in iter_benchmarks(model, tokenizer, spec.eval.benchmarks, device=device,
                                          max_length=spec.train.seq_len):
            reporter.heartbeat()
            if isinstance(res, BenchmarkError):
                _record_error(reporter, "benchmark", bench.task, res)
                continue
            out.update(res.summaries())
            reporter.artifact("benchmark", res.artifact())
    except BenchmarkError as exc:  # lm-eval itself is missing
        _record_error(reporter, "benchmark", "*", exc)
    return out


def run_longctx_evals(model: nn.Module, spec: RunSpec, reporter: Reporter,
                      device: str) -> dict[str, float]:
    """``spec.eval.longctx`` -> ``longctx/<method>/<f>x/<metric>`` summaries, factor by factor."""
    cfg = spec.eval.longctx
    out: dict[str, float] = {}
    if cfg is None:
        return out
    for factor in sorted(set(cfg.factors)):
        one = cfg.model_copy(update={"factors": (factor,)})
        try:
            out.update(evaluate_longctx(model, spec, one, device=device))
        except ValueError as exc:  # e.g. held-out data shorter than factor x seq_len
            _record_error(reporter, "longctx", f"{factor}x", exc)
        reporter.heartbeat()
    if out:
        reporter.artifact("longctx", {"train_len": spec.train.seq_len,
                                      "methods": list(cfg.methods),
                                      "factors": sorted(set(cfg.factors)), "values": out})
    return out


def run_final_evals(model: nn.Module, spec: RunSpec, tokenizer: Any, reporter: Reporter,
                    device: str | torch.device = "cpu") -> dict[str, float]:
    """Run what ``spec.eval`` names; report and return the summaries.

    ``model``: the trained GatedLM, or the DeepSpeed engine around it (unwrapped here).
    ``tokenizer``: the run's tokenizer (None: ``trainer.token_files.tokenizer_for`` of
    ``spec.data``). The model's train/eval mode and RoPE scaling are restored.
    """
    model = unwrap(model)
    device = str(device)
    if not spec.eval.benchmarks and spec.eval.longctx is None:
        return {}
    was_training = model.training
    model.eval()
    summaries: dict[str, float] = {}
    try:
        if spec.eval.benchmarks:
            if tokenizer is None:
                from trainer.token_files import tokenizer_for  # a trained BPE included

                tokenizer = tokenizer_for(spec.data)
            summaries.update(run_benchmark_evals(model, spec, tokenizer, reporter, device))
        summaries.update(run_longctx_evals(model, spec, reporter, device))
    finally:
        model.train(was_training)
    if summaries:
        reporter.summary(summaries)
    return summaries


def evaluate_checkpoint(spec: RunSpec, checkpoint_dir: str, reporter: Reporter, *,
                        benchmarks: tuple[Any, ...] | None = None,
                        device: str = "cpu") -> dict[str, float]:
    """``orchestrator evaluate RUN [--tasks ...]``: final evals of a finished run, later.

    Loads the newest checkpoint of ``checkpoint_dir`` (trainer.load) and runs
    ``run_final_evals``; ``benchmarks`` (BenchmarkSpec tuple) replaces spec.eval.benchmarks
    when given, e.g. built from ``--tasks hellaswag,mmlu``.
    """

    if benchmarks is not None:
        spec = spec.model_copy(update={"eval": spec.eval.model_copy(
            update={"benchmarks": tuple(benchmarks)})})
    model = load_model_from_checkpoint(spec, checkpoint_dir, device=device)
    return run_final_evals(model, spec, None, reporter, device)
