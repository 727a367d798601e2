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

Host syncs: each step's losses and grad norm stay on the device and are read in one transfer
at the read points (every ``log_every`` steps, before evaluation and checkpoints, at the end);
the spike/divergence detectors see every step from those reads (trainer/stepstats.py), so a
divergence stops the run up to ``log_every`` steps after the step it is reported at.

Preemption (trainer/preempt.py): SIGTERM, or ``reporter.heartbeat()`` returning False, stops
the run at the next step boundary (with several ranks: the next read point, decided
collectively); it writes a checkpoint, flushes the reporter and raises ``Preempted(step,
checkpoint, reason)``. A heartbeat that *raises* (e.g. the orchestrator's RunCancelled) does the
same but re-raises that exception after the checkpoint, so a cancel stays a cancel.
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

from contract import metrics, provenance
from contract.config import RunSpec
from contract.params import count_params
from contract.reporter import CHECKPOINT, Reporter
from contract.states import RunStatus
from trainer import checkpoint
from trainer.data import build_data, data_artifact, data_summary, ppl_set_config
from trainer.dist import ensure_single_process_dist
from trainer.engine import build_engine, resolve_precision, set_lr, train_step, trainer_clips
from trainer.evaluation import perplexity, probe_metrics, validation_loss
from trainer.final_eval import run_final_evals
from trainer.model import build_model
from trainer.preempt import Preempted, StopRequest, sigterm_stops
from trainer.provenance import collect as collect_provenance
from trainer.schedule import lr_at
from trainer.stability import DivergenceDetector, SpikeDetector
from trainer.stepstats import StepRow, StepStats, Window

# How a run that trained ends: divergence is a result, not a failure (errors raise).
Outcome = Literal[RunStatus.SUCCEEDED, RunStatus.DIVERGED]


@dataclass
class TrainResult:
    status: Outcome
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

    def heartbeat(self) -> bool | None:
        return self.inner.heartbeat() if self.active else None

    def artifact(self, kind: str, payload: Any) -> None:
        if self.active:
            self.inner.artifact(kind, payload)

    def flush(self) -> None:
        """Persist buffered points (optional in the Reporter contract)."""
        flush = getattr(self.inner, "flush", None)
        if self.active and flush is not None:
            flush()

    @property
    def points_ride_on_end(self) -> bool:
        """The final checkpoint's points go with its record and the end (contract/reporter.py)."""
        return self.active and bool(getattr(self.inner, "points_ride_on_end", False))


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


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
    last_eval: dict[str, float] | None  # the newest validation values, None after a step

    def __init__(self, spec: RunSpec, reporter: Reporter, checkpoint_dir: str | Path,
                 stop: StopRequest | None = None) -> None:

        self.t0 = time.perf_counter()
        self.spec, self.t, self.ckpt_dir = spec, spec.train, Path(checkpoint_dir)
        # A file, or another run's checkpoints, would otherwise fail at the first save (after
        # training) or inside DeepSpeed's load (a size-mismatch traceback).
        checkpoint.check_dir(self.ckpt_dir, spec.fingerprint())
        ensure_single_process_dist()
        self.rank, self.world = tdist.get_rank(), tdist.get_world_size()
        self.rep = _RankZeroReporter(reporter, self.rank)
        # Data first: bad paths / vocab fail here, before anything is written.
        self.data = build_data(spec, self.rank, self.world)
        self.ppl_sets = {name: build_data(spec, cfg=ppl_set_config(spec, cfg, self.data.info),
                                          key=f"eval.ppl_sets.{name}")
                         for name, cfg in spec.eval.ppl_sets.items()}
        # Which corpus (sha256, sizes, tokenizer) this result was trained on: corpora differ by
        # machine (python_code reads the local interpreter's files).
        self.rep.artifact("data", data_artifact(self.data.info))
        seed_everything(spec.seed)  # identical initial weights on every rank
        model = build_model(spec.model, seed=spec.seed)
        if spec.model.init == "paired":
            # Nothing after the build draws from the global RNGs today (batches, eval and probe
            # batches, longctx needles are keyed; no dropout; MoE routing is deterministic);
            # reseeding keeps any later draw a function of the seed, not of how many draws the
            # model's constructors took.
            seed_everything(spec.seed)
        counts = count_params(spec.model)
        self.params = {metrics.PARAMS_TOTAL: float(counts.total),
                       metrics.PARAMS_GATES: float(counts.gates)}
        precision = resolve_precision(self.t.precision)
        self.engine = build_engine(model, spec, precision, self.world)
        # What produced this attempt (code, packages, device, the DeepSpeed config used): once
        # per attempt, before the first step; a resumed attempt may run on other code or host.
        self.rep.artifact(provenance.ARTIFACT,
                          collect_provenance(self.engine, self.world).to_json())
        self.own_clip = trainer_clips(spec)
        self.device = self.engine.device
        self.spikes, self.divergence = SpikeDetector(), DivergenceDetector()
        self.stats, self.window = StepStats(self.world), Window()
        self.stop = stop if stop is not None else StopRequest()
        self.beat_error: BaseException | None = None
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

    def _save(self, beat: bool = True, final: bool = False) -> Path:
        # Points up to this step must be durable before the checkpoint exists: a resumed attempt
        # starts after it and never logs them again. The final one's may ride on the end
        # instead, when the reporter says so (its resumer never starts from an unrecorded one).
        assert not self.stats, "read the pending step stats before a checkpoint"
        if not (final and self.rep.points_ride_on_end):
            self.rep.flush()
        path = checkpoint.save(self.engine, self.ckpt_dir, self.step, self._client_state(),
                               fingerprint=self.spec.fingerprint())
        self.rep.artifact(CHECKPOINT, str(path))
        if beat:
            self._beat()
        return path

    def _beat(self) -> None:
        """Liveness; a False answer or an exception asks the loop to stop (see module doc)."""
        try:
            alive = self.rep.heartbeat()
        except Exception as exc:  # noqa: BLE001 - re-raised after the checkpoint
            self.beat_error = self.beat_error or exc
            self.stop.request(f"heartbeat raised {type(exc).__name__}: {exc}")
            return
        if alive is False:  # the reporter may say why (SIGTERM is a preemption, not a takeover)
            why = getattr(self.rep.inner, "stop_reason", "") or ""
            self.stop.request(why or "heartbeat: this attempt is no longer the run's current one")

    # ---- one optimizer step -----------------------------------------------------------------
    def _train_step(self, s: int) -> torch.Tensor:
        """Update ``s`` (0-based): (total loss, CE loss, pre-clip grad norm), (3,) on the device."""
        set_lr(self.engine, lr_at(s, self.t))
        micro = (self.data.train_batch(s, m) for m in range(self.t.grad_accum))  # (B, T) pairs
        return train_step(self.engine, micro, self.t.grad_clip, self.own_clip)

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
        self._beat()
        return out

    def _stability(self) -> dict[str, float]:
        return {metrics.LOSS_SPIKES: float(self.spikes.count),
                metrics.DIVERGED: float(self.divergence.diverged),
                metrics.MAX_GRAD_NORM: self.max_grad_norm}

    def _finish(self, status: Outcome,
                final_eval: dict[str, float]) -> TrainResult:
        summary = {**final_eval, **self._stability(), **self.params,
                   **data_summary(self.data.info),
                   metrics.WALL_S: self.wall_s(),
                   metrics.TOKENS: float(self.step * self.spec.tokens_per_step),
                   metrics.RESUMED_FROM_STEP: float(self.resumed_from)}
        self.rep.summary(summary)
        self._beat()
        if self.beat_error is not None:
            raise self.beat_error
        return TrainResult(status, self.step, summary)

    # ---- the loop ---------------------------------------------------------------------------
    def _should(self, every: int) -> bool:
        return every > 0 and self.step % every == 0

    def _record(self, rows: list[StepRow]) -> tuple[dict[str, float], int | None]:
        """Feed every read step to the detectors, in order. Returns the train/* values of the
        last step and the first step at which the run diverged (None if it did not)."""
        values: dict[str, float] = {}
        for row in rows:
            self.spikes.update(row.loss)
            self.divergence.update(row.loss, row.step)
            if math.isfinite(row.grad_norm):
                self.max_grad_norm = max(self.max_grad_norm, row.grad_norm)
            values = {metrics.TRAIN_LR: lr_at(row.step - 1, self.t),
                      metrics.TRAIN_GRAD_NORM: row.grad_norm}
            if math.isfinite(row.ce):
                values[metrics.TRAIN_LOSS] = row.ce
            if self.divergence.diverged:
                return values, row.step
        return values, None

    def _read_due(self) -> bool:
        return (self._should(self.t.log_every) or self._should(self.t.eval_every)
                or self._should(self.t.checkpoint_every) or self.step == self.t.steps
                or (self.world == 1 and bool(self.stop)))

    def _stop_agreed(self) -> bool:
        """Whether to stop now; with several ranks a collective decision at read points."""
        if self.world == 1:
            return bool(self.stop)
        flag = torch.tensor([1.0 if self.stop else 0.0], device=self.device)
        tdist.all_reduce(flag, op=tdist.ReduceOp.MAX)
        if flag.item() > 0:
            self.stop.request("another rank was asked to stop")
            return True
        return False

    def _preempt(self) -> None:
        """Checkpoint the current step, flush, raise (Preempted, or the heartbeat's error)."""
        path = checkpoint.latest_checkpoint(self.ckpt_dir)
        if path is None or path[0] != self.step:
            self._save(beat=False)
        self.rep.flush()
        final = checkpoint.latest_checkpoint(self.ckpt_dir)
        assert final is not None and final[0] == self.step
        if self.beat_error is not None:
            raise self.beat_error
        raise Preempted(self.step, final[1], self.stop.reason)

    def _at_read_point(self) -> TrainResult | None:
        """Read the pending steps, detect, log, evaluate, checkpoint; a result if diverged."""
        rows = self.stats.read()
        self.window.close_segment()
        values, diverged_at = self._record(rows)
        if diverged_at is not None:
            self.step = diverged_at  # the step the run is reported to have diverged at
            self.rep.log(self.step, {**values, metrics.DIVERGED: 1.0})
            return self._finish(RunStatus.DIVERGED, {})
        if self._should(self.t.log_every) or self.step == self.t.steps:
            values[metrics.TRAIN_TOKENS_PER_S] = self.window.take(self.spec.tokens_per_step)
            if self.spec.model.clip_residual is not None:
                values[metrics.CLIP_RATE] = self.engine.module.clip_rate()
            self.rep.log(self.step, values)
        self._beat()
        if self._should(self.t.eval_every):
            self.last_eval = self._evaluate()
        if self._should(self.t.checkpoint_every) and self.step < self.t.steps:
            self._save()
        return None

    def execute(self) -> TrainResult:
        self._beat()
        self.last_eval = None
        if self.step == 0 and self.t.eval_every > 0:
            self.last_eval = self._evaluate()  # the untrained baseline of the val curve
        self.window.restart()
        while self.step < self.t.steps:
            s = self.step
            self.stats.add(s + 1, self._train_step(s))
            self.step, self.last_eval = s + 1, None
            self.window.steps += 1
            if not self._read_due():
                self._beat()  # every step: host-only (the DB reporter's thread does the I/O)
                continue
            diverged = self._at_read_point()
            if diverged is not None:
                return diverged
            if self._stop_agreed() and self.step < self.t.steps:
                self._preempt()
            self.window.restart()
        final_eval = self.last_eval if self.last_eval is not None else self._evaluate()
        result = self._finish(RunStatus.SUCCEEDED, {**final_eval, **self._final_evals()})
        latest = checkpoint.latest_checkpoint(self.ckpt_dir)
        if latest is None or latest[0] != self.step:
            # Last, after the summary and its liveness check (a cancel surfaces there): no
            # call follows, so a buffering reporter writes this checkpoint's row with its
            # last write, the attempt's end -- and, if it opted in, the last points too.
            self._save(beat=False, final=True)
        return result

    def _final_evals(self) -> dict[str, float]:
        """spec.eval.benchmarks / longctx (trainer/final_eval.py), rank 0, after training."""
        if self.rank != 0 or not (self.spec.eval.benchmarks or self.spec.eval.longctx):
            return {}

        return run_final_evals(self.engine, self.spec, None, self.rep.inner, self.device)


def train(spec: RunSpec, reporter: Reporter, checkpoint_dir: str | Path) -> TrainResult:
    """Train ``spec`` to completion (or divergence), resuming from ``checkpoint_dir``.

    Raises ``Preempted`` after checkpointing when SIGTERM arrives (handler installed for the
    call when in the main thread, the previous one restored after) or the heartbeat says stop.

    On CPU, torch uses ``ceil(resources.cpus)`` intra-op threads for the run (restored after):
    concurrent runs sharing a few cores each with torch's default thread count oversubscribe
    them, and OpenMP barrier stalls then make steps up to 10x slower (measured here).
    """
    threads = torch.get_num_threads()
    if not torch.cuda.is_available():
        torch.set_num_threads(max(1, math.ceil(spec.resources.cpus)))
    stop = StopRequest()
    try:
        with sigterm_stops(stop):
            return _Run(spec, reporter, checkpoint_dir, stop).execute()
    finally:
        torch.set_num_threads(threads)
