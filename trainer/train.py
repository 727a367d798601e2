"""``train(spec, reporter, checkpoint_dir) -> TrainResult``: one run, start to finish (contract).

One process with no launcher works (trainer.dist sets up a gloo group); under torchrun or Ray
Train the existing group is used and each rank draws its own shard (trainer/data.py). Only
rank 0 reports. Steps are counted 1..steps: "step k" is the state after k optimizer updates.

Reported: ``train/loss`` (the language-modelling cross-entropy, averaged over micro-batches and
ranks; the MoE aux loss is optimised but not included), ``train/lr``, ``train/grad_norm``
(pre-clip global norm), ``train/tokens_per_s`` (all ranks, training steps only) every
``log_every`` steps; ``val/*`` and ``probe/*`` at step 0, every ``eval_every`` steps and at the
end; the summaries at the end. Divergence and spikes use the optimised (total) loss. ``cost/
wall_s`` adds the wall time of earlier attempts up to the checkpoint this attempt resumed from.

Resume: if ``checkpoint_dir`` holds a complete checkpoint, the newest is loaded (model,
optimizer, step, spike/divergence detectors, RNG, accumulated wall time) and training
continues from there; since batches and learning rates are pure functions of the step, the
loss trajectory is the uninterrupted one.

``train.fail_at_step: N`` (test-only fault) raises ``RuntimeError("injected failure at step
N")`` just before update N, but only in an attempt that started from scratch: an attempt that
resumed from a checkpoint never fires it, so a retry/rerun after the failure succeeds.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as tdist

from trainer import checkpoint, metrics
from trainer.config import RunSpec
from trainer.data import build_data
from trainer.engine import build_engine, resolve_precision, set_lr
from trainer.evaluation import perplexity, probe_metrics, validation_loss
from trainer.reporter import Reporter
from trainer.schedule import lr_at
from trainer.stability import DivergenceDetector, SpikeDetector


@dataclass
class TrainResult:
    status: Literal["succeeded", "diverged"]
    steps: int
    summary: dict[str, float] = field(default_factory=dict)


class _RankZeroReporter:
    """Forwards to the real reporter on rank 0 only."""

    def __init__(self, inner: Reporter, rank: int) -> None:
        self.inner, self.active = inner, rank == 0

    def log(self, step: int, values: Mapping[str, float]) -> None:
        if self.active and values:
            self.inner.log(step, values)

    def summary(self, values: Mapping[str, float]) -> None:
        if self.active:
            self.inner.summary(values)

    def heartbeat(self) -> None:
        if self.active:
            self.inner.heartbeat()

    def artifact(self, kind: str, payload: Any) -> None:
        if self.active:
            self.inner.artifact(kind, payload)

    def flush(self) -> None:
        """Persist buffered points (optional in the Reporter contract)."""
        flush = getattr(self.inner, "flush", None)
        if self.active and flush is not None:
            flush()


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _grad_norm(module: torch.nn.Module) -> float:
    """Pre-clip global L2 norm of the gradients held in ``.grad`` (ZeRO 0)."""
    norms = [p.grad.detach().float().norm() for p in module.parameters() if p.grad is not None]
    return float(torch.stack(norms).norm()) if norms else 0.0


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _Run:
    """The state of one attempt; ``execute`` runs it."""

    def __init__(self, spec: RunSpec, reporter: Reporter, checkpoint_dir: str | Path) -> None:
        from trainer.dist import ensure_single_process_dist
        from trainer.model import build_model
        from trainer.params import count_params

        self.t0 = time.perf_counter()
        self.spec, self.t, self.ckpt_dir = spec, spec.train, Path(checkpoint_dir)
        ensure_single_process_dist()
        self.rank, self.world = tdist.get_rank(), tdist.get_world_size()
        self.rep = _RankZeroReporter(reporter, self.rank)
        # Data first: bad paths / vocab fail here, before anything is written.
        self.data = build_data(spec, self.rank, self.world)
        self.ppl_sets = {name: build_data(spec, cfg=cfg)
                         for name, cfg in spec.eval.ppl_sets.items()}
        seed_everything(spec.seed)  # identical initial weights on every rank
        model = build_model(spec.model)
        counts = count_params(spec.model)
        self.params = {metrics.PARAMS_TOTAL: float(counts.total),
                       metrics.PARAMS_GATES: float(counts.gates)}
        precision = resolve_precision(self.t.precision)
        self.engine = build_engine(model, spec, precision, self.world)
        self.own_grad_norm = self.t.zero_stage == 0 and precision.name == "fp32"
        self.device = self.engine.device
        self.spikes, self.divergence = SpikeDetector(), DivergenceDetector()
        self.step, self.max_grad_norm, self.prior_wall_s = 0, 0.0, 0.0
        self.resumed_from = self._resume()

    # ---- checkpoint state -------------------------------------------------------------------
    def _client_state(self) -> dict[str, Any]:
        return {"gatesweep": {
            "step": self.step, "data_position": self.step, "spikes": self.spikes.state_dict(),
            "divergence": self.divergence.state_dict(), "max_grad_norm": self.max_grad_norm,
            "wall_s": self.wall_s(), "rng": _rng_state(), "fingerprint": self.spec.fingerprint()}}

    def _resume(self) -> int:
        loaded = checkpoint.load(self.engine, self.ckpt_dir)
        if loaded is None:
            return 0
        step, client = loaded
        state = client.get("gatesweep")
        if state is None or state.get("fingerprint") != self.spec.fingerprint():
            raise ValueError(f"checkpoint_dir: {self.ckpt_dir} holds a checkpoint of a different "
                             f"run (its spec fingerprint differs); use an empty directory")
        self.step, self.max_grad_norm = step, float(state["max_grad_norm"])
        self.spikes.load_state_dict(state["spikes"])
        self.divergence.load_state_dict(state["divergence"])
        self.prior_wall_s = float(state["wall_s"])
        _set_rng_state(state["rng"])
        return step

    def wall_s(self) -> float:
        return self.prior_wall_s + time.perf_counter() - self.t0

    def _save(self) -> None:
        # Points up to this step must be durable before the checkpoint exists: a resumed attempt
        # starts after it and never logs them again.
        self.rep.flush()
        path = checkpoint.save(self.engine, self.ckpt_dir, self.step, self._client_state())
        self.rep.artifact("checkpoint", str(path))
        self.rep.heartbeat()

    # ---- one optimizer step -----------------------------------------------------------------
    def _train_step(self, s: int) -> tuple[float, float, float]:
        """Update ``s`` (0-based): returns (total loss, CE loss, pre-clip grad norm)."""
        set_lr(self.engine, lr_at(s, self.t))
        total = torch.zeros(2)
        own_norm = None
        for micro in range(self.t.grad_accum):
            x, y = self.data.train_batch(s, micro)  # (B, T), (B, T)
            out = self.engine(x.to(self.device), y.to(self.device))
            self.engine.backward(out.loss)
            if micro == self.t.grad_accum - 1 and self.own_grad_norm:
                own_norm = _grad_norm(self.engine.module)  # DS keeps no norm at ZeRO 0 fp32
            self.engine.step()
            total += torch.stack([out.loss.detach().float(), out.ce_loss.detach().float()]).cpu()
        total /= self.t.grad_accum
        if self.world > 1:  # every rank must agree on divergence: use the global mean
            tdist.all_reduce(total)
            total /= self.world
        ds_norm = self.engine.get_global_grad_norm()
        norm = float(ds_norm) if ds_norm is not None else float(own_norm or 0.0)
        return float(total[0]), float(total[1]), norm

    # ---- evaluation -------------------------------------------------------------------------
    def _evaluate(self) -> dict[str, float]:
        """Validation loss/PPL, per-set PPL and probes at the current step; logged."""
        n = self.t.eval_batches
        loss = validation_loss(self.engine, self.data.val_batches(n), self.device)
        out = {metrics.VAL_LOSS: loss, metrics.VAL_PPL: perplexity(loss)}
        for name, stream in self.ppl_sets.items():
            set_loss = validation_loss(self.engine, stream.val_batches(n), self.device)
            out[metrics.val_set_ppl(name)] = perplexity(set_loss)
        probe_idx = self.data.val_batch(0)[0].to(self.device)  # the FIXED probe batch
        probes, hist = probe_metrics(self.engine.module, probe_idx, self.spec.eval.probes,
                                     self.step)
        out.update(probes)
        self.rep.log(self.step, out)
        if hist is not None:
            self.rep.artifact("gate_histogram", hist)
        self.rep.heartbeat()
        return out

    def _stability(self) -> dict[str, float]:
        return {metrics.LOSS_SPIKES: float(self.spikes.count),
                metrics.DIVERGED: float(self.divergence.diverged),
                metrics.MAX_GRAD_NORM: self.max_grad_norm}

    def _finish(self, status: Literal["succeeded", "diverged"],
                final_eval: dict[str, float]) -> TrainResult:
        summary = {**final_eval, **self._stability(), **self.params,
                   metrics.WALL_S: self.wall_s(),
                   metrics.TOKENS: float(self.step * self.spec.tokens_per_step),
                   metrics.RESUMED_FROM_STEP: float(self.resumed_from)}
        self.rep.summary(summary)
        self.rep.heartbeat()
        return TrainResult(status, self.step, summary)

    # ---- the loop ---------------------------------------------------------------------------
    def _should(self, every: int) -> bool:
        return every > 0 and self.step % every == 0

    def _record_step(self, loss: float, ce: float, norm: float, lr: float) -> dict[str, float]:
        """Feed the detectors; the train/* values of this step."""
        self.spikes.update(loss)
        self.divergence.update(loss, self.step)
        if np.isfinite(norm):
            self.max_grad_norm = max(self.max_grad_norm, norm)
        values = {metrics.TRAIN_LR: lr, metrics.TRAIN_GRAD_NORM: norm}
        if np.isfinite(ce):
            values[metrics.TRAIN_LOSS] = ce
        return values

    def _log_train(self, values: dict[str, float], window: list[float]) -> None:
        """train/* at log steps; ``window`` = [seconds, steps] of training since the last log."""
        if not (self._should(self.t.log_every) or self.step == self.t.steps):
            return
        values[metrics.TRAIN_TOKENS_PER_S] = (
            window[1] * self.spec.tokens_per_step / max(window[0], 1e-9))
        if self.spec.model.clip_residual is not None:
            values[metrics.CLIP_RATE] = self.engine.module.clip_rate()
        self.rep.log(self.step, values)
        window[:] = [0.0, 0]

    def execute(self) -> TrainResult:
        self.rep.heartbeat()
        if self.step == 0 and self.t.eval_every > 0:
            self._evaluate()  # the untrained baseline of the val curve
        last_eval: dict[str, float] | None = None
        window = [0.0, 0]  # training seconds, steps since the last train/* log
        while self.step < self.t.steps:
            s = self.step
            if self.t.fail_at_step == s + 1 and self.resumed_from == 0:
                raise RuntimeError(f"injected failure at step {s + 1}")
            t_step = time.perf_counter()
            loss, ce, norm = self._train_step(s)
            window[0] += time.perf_counter() - t_step
            window[1] += 1
            self.step, last_eval = s + 1, None
            values = self._record_step(loss, ce, norm, lr_at(s, self.t))
            if self.divergence.diverged:
                self.rep.log(self.step, {**values, metrics.DIVERGED: 1.0})
                return self._finish("diverged", {})
            self._log_train(values, window)
            self.rep.heartbeat()  # every step: the DB reporter throttles its writes
            if self._should(self.t.eval_every):
                last_eval = self._evaluate()
            if self._should(self.t.checkpoint_every) and self.step < self.t.steps:
                self._save()
        final_eval = last_eval if last_eval is not None else self._evaluate()
        latest = checkpoint.latest_checkpoint(self.ckpt_dir)
        if latest is None or latest[0] != self.step:
            self._save()
        return self._finish("succeeded", {**final_eval, **self._final_evals()})

    def _final_evals(self) -> dict[str, float]:
        """spec.eval.benchmarks / longctx (trainer/final_eval.py), rank 0, after training."""
        if self.rank != 0 or not (self.spec.eval.benchmarks or self.spec.eval.longctx):
            return {}
        from trainer.final_eval import run_final_evals

        return run_final_evals(self.engine, self.spec, None, self.rep.inner, self.device)


def train(spec: RunSpec, reporter: Reporter, checkpoint_dir: str | Path) -> TrainResult:
    """Train ``spec`` to completion (or divergence), resuming from ``checkpoint_dir``.

    On CPU, torch uses ``ceil(resources.cpus)`` intra-op threads for the run (restored after):
    concurrent runs sharing a few cores each with torch's default thread count oversubscribe
    them, and OpenMP barrier stalls then make steps up to 10x slower (measured here).
    """
    threads = torch.get_num_threads()
    if not torch.cuda.is_available():
        torch.set_num_threads(max(1, math.ceil(spec.resources.cpus)))
    try:
        return _Run(spec, reporter, checkpoint_dir).execute()
    finally:
        torch.set_num_threads(threads)
