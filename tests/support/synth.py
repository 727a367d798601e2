"""Synthetic sweeps written THROUGH the real writer API (benchmarks, dashboard fixtures).

    python -m tests.support.synth --db sqlite:///big.db --runs 10000 --points 1000

``fill(db, runs=N, points=M)`` registers N runs over a set of gate variants x seeds (x an
optional LR ladder), and for each: start_attempt, log_metrics (M points per run spread over
``train/loss``, ``train/lr``, ``train/grad_norm``), log_summaries (val/loss, val/ppl, probes,
stability, params), finish_attempt. Loss curves are deterministic (``rng_seed``) with an
occasional spike; a few high-LR runs diverge. Nothing here is real training data.
"""

from __future__ import annotations

import argparse
import math
import random
import time
from dataclasses import dataclass
from typing import Any

from results_db.db import ResultsDB
from results_db.rows import NewRun

# (variant, gates): the study's variants as RunSpec-shaped gate lists.
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


@dataclass(frozen=True)
class Planned:
    new: NewRun
    variant: str
    lr: float


def plan(runs: int, seeds: int = 3, lrs: tuple[float, ...] = (3e-3,),
         sweep: str = "synth") -> list[Planned]:
    """``runs`` runs cycling variants x lrs x seeds (the grid repeats with a ``rep`` index)."""
    out: list[Planned] = []
    i = 0
    while len(out) < runs:
        rep, k = divmod(i, len(VARIANTS) * len(lrs) * seeds)
        v_idx, rest = divmod(k, len(lrs) * seeds)
        lr_idx, seed = divmod(rest, seeds)
        variant, gates = VARIANTS[v_idx]
        lr = lrs[lr_idx]
        name = f"{variant}-lr{lr:g}-s{seed}" + (f"-r{rep}" if rep else "")
        cfg = {"name": name, "sweep": sweep, "seed": seed,
               "model": {"n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 4,
                         "gates": gates, "nonlinearity": "none", "d_ff": 172,
                         "rep": rep},  # rep keeps repeated grids distinct configs
               "train": {"lr": lr, "steps": 1000}}
        label = variant + (f"-r{rep}" if rep else "")  # repeated grids: distinct variants
        out.append(Planned(NewRun(name=name, fingerprint=f"{sweep}:{name}", variant=label,
                                  seed=seed, config=cfg), variant, lr))
        i += 1
    return out


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


def _points(rng: random.Random, p: Planned, points: int, final: float,
            diverge: bool) -> list[tuple[int, str, float]]:
    n_steps = max(1, -(-points // len(METRIC_NAMES)))  # ceil: exactly `points` after the cut
    loss = _curve(rng, n_steps, final, diverge)
    out: list[tuple[int, str, float]] = []
    for t in range(n_steps):
        lr = p.lr * min(1.0, (t + 1) / 20) * (0.5 + 0.5 * math.cos(math.pi * t / n_steps))
        out += [(t, "train/loss", loss[t]), (t, "train/lr", lr),
                (t, "train/grad_norm", abs(rng.gauss(1.0, 0.3)))]
    return out[:points]


def _summaries(rng: random.Random, p: Planned, final: float, diverge: bool) -> dict[str, float]:
    gated = p.variant != "baseline"
    val_loss = float("nan") if diverge else final + rng.gauss(0, 0.01)
    return {"val/loss": val_loss, "val/ppl": math.exp(val_loss),
            "probe/first_token_attention": rng.uniform(0.02, 0.1) if gated else
            rng.uniform(0.4, 0.6),
            "probe/max_activation": rng.uniform(80, 120) if gated else rng.uniform(800, 1200),
            "probe/gate_score_mean": rng.uniform(0.1, 0.3) if gated else float("nan"),
            "stability/loss_spikes": float(rng.randint(0, 3)),
            "stability/diverged": 1.0 if diverge else 0.0,
            "params/total": 120_000.0, "params/gates": 4096.0 if gated else 0.0}


def fill(db: ResultsDB, runs: int = 100, points: int = 1000, seeds: int = 3,
         lrs: tuple[float, ...] = (3e-3,), sweep: str = "synth", rng_seed: int = 0,
         register_batch: int = 1000) -> dict[str, float]:
    """Write ``runs`` finished runs with ``points`` metric points each; returns counts/timings."""
    rng = random.Random(rng_seed)
    sweep_id = db.ensure_sweep(sweep, f"# synthetic sweep: {runs} runs x {points} points",
                               "generated by tests.support.synth")
    planned = plan(runs, seeds, lrs, sweep)
    t0 = time.perf_counter()
    ids: list[int] = []
    for i in range(0, len(planned), register_batch):
        res = db.register_runs(sweep_id, [p.new for p in planned[i:i + register_batch]])
        by_fp = {r.fingerprint: r.id for r in res.to_run + res.cached}
        ids += [by_fp[p.new.fingerprint] for p in planned[i:i + register_batch]]
    metric_s = 0.0
    for run_id, p in zip(ids, planned, strict=True):
        final = 3.0 * (1 + _EFFECT[p.variant]) + 0.05 * abs(math.log10(p.lr / 3e-3))
        diverge = p.lr >= 2e-2 and p.variant == "baseline"
        att = db.start_attempt(run_id, host="synth")
        t = time.perf_counter()
        db.log_metrics(run_id, att.id, _points(rng, p, points, final, diverge))
        metric_s += time.perf_counter() - t
        db.log_summaries(run_id, att.id, _summaries(rng, p, final, diverge))
        db.finish_attempt(att.id, "diverged" if diverge else "succeeded")
    total = time.perf_counter() - t0
    return {"runs": len(ids), "metric_rows": len(ids) * points, "total_s": total,
            "metric_s": metric_s, "metric_rows_per_s": len(ids) * points / max(metric_s, 1e-9)}


def fill_curves(db: ResultsDB, runs: int = 100, steps: int = 100_000,
                names: tuple[str, ...] = ("train/loss",), sweep: str = "synth-curves",
                rng_seed: int = 0, batch: int = 20_000) -> dict[str, float]:
    """``runs`` finished runs with ``steps`` points of each of ``names`` (long curves for the
    downsampling benchmark: 100 x 100k = 10M rows), logged in ``batch``-point calls."""
    rng = random.Random(rng_seed)
    sweep_id = db.ensure_sweep(sweep, f"# synthetic curves: {runs} runs x {steps} steps",
                               "generated by tests.support.synth.fill_curves")
    planned = plan(runs, sweep=sweep)
    res = db.register_runs(sweep_id, [p.new for p in planned])
    by_fp = {r.fingerprint: r.id for r in res.to_run + res.cached}
    t0 = time.perf_counter()
    for i, p in enumerate(planned):
        run_id = by_fp[p.new.fingerprint]
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
    """A small RunSpec-shaped config dict (hand-built test runs)."""
    return {"seed": seed, "model": {"n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 4,
                                    "d_ff": 172, "gates": list(gates or []),
                                    "nonlinearity": "none", **model},
            "train": {"lr": lr, "steps": 100}}


def add_finished_run(db: ResultsDB, sweep_id: int, name: str, variant: str, seed: int = 0,
                     config: dict[str, Any] | None = None, status: str = "succeeded",
                     summaries: dict[str, float] | None = None,
                     points: list[tuple[int, str, float]] | None = None) -> int:
    """Register one run and play a whole attempt through the writer API; returns its id."""
    cfg = config if config is not None else gate_config(seed=seed)
    res = db.register_runs(sweep_id, [NewRun(name=name, fingerprint=f"{sweep_id}:{name}",
                                             variant=variant, seed=seed, config=cfg)])
    run = (res.to_run + res.cached)[0]
    att = db.start_attempt(run.id, host="test")
    if points:
        db.log_metrics(run.id, att.id, points)
    if summaries:
        db.log_summaries(run.id, att.id, summaries)
    db.finish_attempt(att.id, status, error=None if status != "failed" else "synthetic failure")
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
