"""Synthetic sweeps of any size, registered by the real submit path (tests.support.synthdb).

    python -m tests.support.synth --db sqlite:///big.db --runs 10000 --points 1000

``fill(db, runs=N, points=M)`` registers N runs over a set of gate variants x seeds (x an
optional LR ladder), and for each: start_attempt, log_metrics (M points per run spread over
``train/loss``, ``train/lr``, ``train/grad_norm``), log_summaries (val/loss, val/ppl, probes,
stability, the run's real parameter counts), finish_attempt. Loss curves are deterministic
(``rng_seed``) with an occasional spike; a few high-LR runs diverge. Nothing here is real
training data.
"""

from __future__ import annotations

import argparse
import math
import random
import re
import time
from collections.abc import Iterator
from typing import Any

from orchestrator.sweep.expand import MAX_RUNS
from results_db.db import ResultsDB
from tests.support import synthdb
from tests.support.synthdb import Registered

# (variant, gates): the study's variants as RunSpec gate lists.
VARIANTS: tuple[tuple[str, list[dict[str, Any]]], ...] = (
    ("baseline", []),
    ("sdpa_elementwise", [{"position": "G1", "granularity": "elementwise"}]),
    ("sdpa_headwise", [{"position": "G1", "granularity": "headwise"}]),
    ("sdpa_head_shared", [{"position": "G1", "sharing": "head_shared"}]),
    ("sdpa_additive_silu", [{"position": "G1", "combine": "additive", "activation": "silu"}]),
    ("value_elementwise", [{"position": "G2"}]),
    ("key_elementwise", [{"position": "G3"}]),
    ("query_elementwise", [{"position": "G4"}]),
    ("dense_elementwise", [{"position": "G5"}]),
    ("sdpa_const", [{"position": "G1", "input_dependent": False}]),
)
# Relative val/loss effect per variant (gated SDPA helps most, as in the paper's Table 1).
_EFFECT = {"baseline": 0.0, "sdpa_elementwise": -0.04, "sdpa_headwise": -0.035,
           "sdpa_head_shared": -0.02, "sdpa_additive_silu": -0.01, "value_elementwise": -0.02,
           "key_elementwise": 0.0, "query_elementwise": 0.0, "dense_elementwise": -0.005,
           "sdpa_const": 0.005}
METRIC_NAMES = ("train/loss", "train/lr", "train/grad_norm")
BASE: dict[str, Any] = {"model": {"n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 4,
                                  "d_ff": 172, "nonlinearity": "none"},
                        "train": {"steps": 1000}}
ROPE_BASE = 10000.0


def specs(runs: int, seeds: int = 3, lrs: tuple[float, ...] = (3e-3,), sweep: str = "synth",
          steps: int = 1000) -> Iterator[dict[str, Any]]:
    """The sweep files of ``runs`` runs: VARIANTS x lrs x seeds, repeated. Repeat ``rep`` > 0
    of the grid is a distinct variant (``<variant>_r<rep>``) whose configs differ by
    ``model.rope_base`` (a fingerprint may not repeat, and the repeats must not pool as seeds);
    a file holds at most MAX_RUNS runs (expand's cap), so a big sweep is several files of one
    name, and the last variant of the grid may be cut by exclude rules."""
    unit = len(lrs) * seeds
    per_file = max(1, MAX_RUNS // unit)
    n_units = -(-runs // unit)
    for first in range(0, n_units, per_file):
        variants: dict[str, dict[str, Any]] = {}
        exclude: list[dict[str, Any]] = []
        for u in range(first, min(first + per_file, n_units)):
            rep, v_idx = divmod(u, len(VARIANTS))
            variant, gates = VARIANTS[v_idx]
            name = variant + (f"_r{rep}" if rep else "")
            delta: dict[str, Any] = {"model.gates": gates} if gates else {}
            if rep:
                delta["model.rope_base"] = ROPE_BASE + rep
            variants[name] = delta
            exclude += _cut(name, runs - u * unit, lrs, seeds)
        spec: dict[str, Any] = {
            "name": sweep, "description": f"synthetic sweep: {runs} runs",
            "base": {**BASE, "train": {**BASE["train"], "steps": steps}},
            "variants": variants, "axes": {"train.lr": list(lrs)},
            "seeds": list(range(seeds))}
        if exclude:
            spec["exclude"] = exclude
        yield spec


def _cut(variant: str, left: int, lrs: tuple[float, ...], seeds: int) -> list[dict[str, Any]]:
    """Exclude rules that keep the first ``left`` runs (LR-major, seed-minor) of a variant."""
    if left >= len(lrs) * seeds:
        return []
    q, r = divmod(left, seeds)
    rules: list[dict[str, Any]] = []
    if r:
        rules.append({"variant": variant, "train.lr": lrs[q], "seed": list(range(r, seeds))})
        q += 1
    if q < len(lrs):
        rules.append({"variant": variant, "train.lr": list(lrs[q:])})
    return rules


def register(db: ResultsDB, runs: int, seeds: int = 3, lrs: tuple[float, ...] = (3e-3,),
             sweep: str = "synth", steps: int = 1000) -> list[Registered]:
    """Register the ``runs`` runs of ``specs`` (pending), in grid order."""
    return [r for spec in specs(runs, seeds, lrs, sweep, steps)
            for r in synthdb.register(db, spec)]


def _base_variant(r: Registered) -> str:
    return re.sub(r"_r\d+$", "", r.run.variant)  # a repeat behaves as its variant


def _curve(rng: random.Random, n_steps: int, final: float, diverge: bool) -> list[float]:
    loss = []
    for t in range(n_steps):
        x = final + (5.5 - final) * math.exp(-6 * t / max(n_steps, 1)) + rng.gauss(0, 0.02)
        if rng.random() < 0.002:  # a loss spike
            x *= 1.8
        if diverge and t > n_steps * 0.6:
            x = float("nan")
        loss.append(x)
    return loss


def _points(rng: random.Random, lr0: float, points: int, final: float,
            diverge: bool) -> list[tuple[int, str, float]]:
    n_steps = max(1, -(-points // len(METRIC_NAMES)))  # ceil: exactly `points` after the cut
    loss = _curve(rng, n_steps, final, diverge)
    out: list[tuple[int, str, float]] = []
    for t in range(n_steps):
        lr = lr0 * min(1.0, (t + 1) / 20) * (0.5 + 0.5 * math.cos(math.pi * t / n_steps))
        out += [(t, "train/loss", loss[t]), (t, "train/lr", lr),
                (t, "train/grad_norm", abs(rng.gauss(1.0, 0.3)))]
    return out[:points]


def _summaries(rng: random.Random, r: Registered, final: float,
               diverge: bool) -> dict[str, float]:
    gated = bool(r.run.spec.model.gates)
    val_loss = float("nan") if diverge else final + rng.gauss(0, 0.01)
    return {"val/loss": val_loss, "val/ppl": math.exp(val_loss),
            "probe/first_token_attention": rng.uniform(0.02, 0.1) if gated else
            rng.uniform(0.4, 0.6),
            "probe/max_activation": rng.uniform(80, 120) if gated else rng.uniform(800, 1200),
            "probe/gate_score_mean": rng.uniform(0.1, 0.3) if gated else float("nan"),
            "stability/loss_spikes": float(rng.randint(0, 3)),
            "stability/diverged": 1.0 if diverge else 0.0,
            # what the trainer logs: the model's real counts (register stored the same)
            "params/total": float(r.row.params_total or 0),
            "params/gates": float(r.row.params_gates or 0)}


def fill(db: ResultsDB, runs: int = 100, points: int = 1000, seeds: int = 3,
         lrs: tuple[float, ...] = (3e-3,), sweep: str = "synth",
         rng_seed: int = 0) -> dict[str, float]:
    """Write ``runs`` finished runs with ``points`` metric points each; returns counts/timings."""
    rng = random.Random(rng_seed)
    t0 = time.perf_counter()
    registered = register(db, runs, seeds, lrs, sweep)
    metric_s = 0.0
    for r in registered:
        variant, lr = _base_variant(r), r.run.spec.train.lr
        final = 3.0 * (1 + _EFFECT[variant]) + 0.05 * abs(math.log10(lr / 3e-3))
        diverge = lr >= 2e-2 and variant == "baseline"
        att = db.start_attempt(r.id, host="synth")
        t = time.perf_counter()
        db.log_metrics(r.id, att.id, _points(rng, lr, points, final, diverge))
        metric_s += time.perf_counter() - t
        db.log_summaries(r.id, att.id, _summaries(rng, r, final, diverge))
        db.finish_attempt(att.id, "diverged" if diverge else "succeeded")
    total = time.perf_counter() - t0
    n = len(registered)
    return {"runs": n, "metric_rows": n * points, "total_s": total,
            "metric_s": metric_s, "metric_rows_per_s": n * points / max(metric_s, 1e-9)}


def fill_curves(db: ResultsDB, runs: int = 100, steps: int = 100_000,
                names: tuple[str, ...] = ("train/loss",), sweep: str = "synth-curves",
                rng_seed: int = 0, batch: int = 20_000) -> dict[str, float]:
    """``runs`` finished runs with ``steps`` points of each of ``names`` (long curves for the
    downsampling benchmark: 100 x 100k = 10M rows), logged in ``batch``-point calls."""
    rng = random.Random(rng_seed)
    planned = register(db, runs, sweep=sweep)
    t0 = time.perf_counter()
    for i, r in enumerate(planned):
        run_id = r.id
        diverge = i % 10 == 9  # every tenth run ends in NaN (NULL) losses
        att = db.start_attempt(run_id, host="synth")
        for name in names:
            curve = _curve(rng, steps, 3.0, diverge)
            for lo in range(0, steps, batch):
                db.log_metrics(run_id, att.id, [(t, name, curve[t])
                                                for t in range(lo, min(lo + batch, steps))])
        db.finish_attempt(att.id, "diverged" if diverge else "succeeded")
    total = time.perf_counter() - t0
    return {"runs": len(planned), "metric_rows": len(planned) * steps * len(names),
            "total_s": total}


def gate_config(gates: list[dict[str, Any]] | None = None, lr: float = 3e-3, seed: int = 0,
                **model: Any) -> dict[str, Any]:
    """A small partial RunSpec config: add_finished_run's default base, and the config of
    tests that register or key runs by hand."""
    return {"seed": seed, "model": {"n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 4,
                                    "d_ff": 172, "gates": list(gates or []),
                                    "nonlinearity": "none", **model},
            "train": {"lr": lr, "steps": 100}}


def add_finished_run(db: ResultsDB, sweep_id: int, variant: str, seed: int = 0,
                     config: dict[str, Any] | None = None, status: str = "succeeded",
                     summaries: dict[str, float] | None = None,
                     points: list[tuple[int, str, float]] | None = None) -> int:
    """Register one run of sweep ``sweep_id`` by the submit path (a one-run sweep file whose
    base is ``config``: gate_config's by default) and play a whole attempt; returns its id.
    The run is named as expand names it (``<variant>-s<seed>``); a config registered before
    in this sweep is an error (it would be the same run)."""
    sweep = db.sweeps().filter(id=sweep_id)["name"].item()
    cfg = config if config is not None else gate_config(seed=seed)
    base = {k: v for k, v in cfg.items() if k not in ("name", "sweep", "seed", "resources")}
    key = variant if synthdb.VARIANT_NAME.fullmatch(variant) else "variant"
    spec: dict[str, Any] = {"name": sweep, "base": base, "variants": {key: {}}, "seeds": [seed]}
    if "resources" in cfg:  # a sweep file's resources sit beside its base
        spec["resources"] = cfg["resources"]
    (run,) = synthdb.register(db, spec, labels={key: variant} if key != variant else None)
    if run.row.status != "pending" or db.attempts(run.id):
        raise ValueError(f"add_finished_run: {run.run.name} of sweep {sweep} is registered "
                         "already (an equal config is the same run)")
    synthdb.play(db, run.id, status, host="test", points=points or (), summaries=summaries,
                 error="synthetic failure")
    return run.id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True, help="results DB URL, e.g. sqlite:///big.db")
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--points", type=int, default=1000, help="metric points per run")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lrs", type=float, nargs="+", default=[3e-3])
    ap.add_argument("--sweep", default="synth")
    args = ap.parse_args()
    import results_db

    with results_db.open(args.db) as db:
        stats = fill(db, args.runs, args.points, args.seeds, tuple(args.lrs), args.sweep)
    print(" ".join(f"{k}={v:.6g}" for k, v in stats.items()))


if __name__ == "__main__":
    main()
