"""A small, fully known sweep: registered by the real submit path (tests.support.synthdb),
played through results_db's writer API.

Used by the dashboard tests (their expected numbers are computed by hand from ``SAMPLE``), the
browser test and the render benchmark, and handy to look at the app without training:

    python -m tests.support.dashboard_sample sqlite:///demo.db && GATESWEEP_DB=sqlite:///demo.db \
        streamlit run dashboard/app.py
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support import synthdb

if TYPE_CHECKING:
    from results_db import ResultsDB
    from tests.support.synthdb import Registered

SWEEP = "demo"
STEPS = 100
SPIKE_STEP = 50  # baseline seed 0 has a loss spike here


@dataclass(frozen=True)
class Variant:
    name: str
    gates: tuple[dict[str, Any], ...]
    ppl: tuple[float | None, ...]  # final val/ppl per seed; None = the run did not succeed
    ends: tuple[str, ...]  # final state per seed
    probes: tuple[float, float, float]  # gate score, max activation, first-token attention


# Parameter counts are the real ones of each model (8192 gate parameters for G1
# elementwise: 2 layers x 64 x 64), stored by register and logged as params/* summaries.
SAMPLE: tuple[Variant, ...] = (
    Variant("baseline", (), (10.0, 10.2, 10.4), ("succeeded",) * 3, (math.nan, 300.0, 0.45)),
    Variant("sdpa_elementwise", ({"position": "G1"},), (9.0, 9.1, 9.2), ("succeeded",) * 3,
            (0.12, 40.0, 0.05)),
    Variant("sdpa_headwise", ({"position": "G1", "granularity": "headwise"},), (9.5, 9.7, 9.9),
            ("succeeded",) * 3, (0.18, 60.0, 0.08)),
    Variant("value_elementwise", ({"position": "G2"},), (9.8, 10.0, None),
            ("succeeded", "succeeded", "failed"), (0.22, 120.0, 0.30)),
    Variant("sdpa_ns_sigmoid", ({"position": "G1", "activation": "ns_sigmoid"},),
            (None, 11.0, 11.4), ("diverged", "succeeded", "succeeded"), (0.65, 250.0, 0.44)),
    Variant("key_elementwise", ({"position": "G3"},), (None, None), ("running", "pending"),
            (0.3, 200.0, 0.4)),
)
N_LAYER = 2
LONGCTX_FACTORS = (1, 2, 4)
MODEL: dict[str, Any] = {"vocab_size": 256, "n_layer": N_LAYER, "d_model": 64, "n_head": 4,
                         "n_kv_head": 2, "head_dim": 16, "d_ff": 176, "nonlinearity": "none"}
TRAIN: dict[str, Any] = {"steps": STEPS, "lr": 3e-3, "batch_size": 16}
HOST = "sample-host"
FAILURE = "RuntimeError: injected failure at step 40"


def config(v: Variant, seed: int) -> dict[str, Any]:
    """A RunSpec-shaped config of one run (hand-built runs of the browser test)."""
    return {"name": f"{v.name}-s{seed}", "sweep": SWEEP, "seed": seed,
            "model": {**MODEL, "gates": list(v.gates)}, "train": dict(TRAIN)}


def sweep_spec(name: str, variants: dict[str, dict[str, Any]], seeds: int,
               **more: Any) -> dict[str, Any]:
    """A sweep file over MODEL/TRAIN: ``variants`` are sweep-file deltas, ``more`` adds top-level
    keys (axes, exclude)."""
    return {"name": name, "description": f"{name}: written by tests.support.dashboard_sample",
            "base": {"model": MODEL, "train": TRAIN}, "variants": variants,
            "seeds": list(range(seeds)), **more}


def _gated(gates: Any) -> dict[str, Any]:
    return {"model.gates": [dict(g) for g in gates]} if gates else {}


def loss_curve(v_index: int, seed: int) -> list[tuple[int, str, float]]:
    """train/loss, train/lr, train/grad_norm points: a decaying loss (+ one spike)."""
    pts: list[tuple[int, str, float]] = []
    for step in range(1, STEPS + 1):
        loss = 5.0 * math.exp(-step / 40) + 2.0 - 0.05 * v_index + 0.01 * seed
        if v_index == 0 and seed == 0 and step == SPIKE_STEP:
            loss *= 2.0
        pts += [(step, "train/loss", loss), (step, "train/lr", 3e-3 * min(1.0, step / 10)),
                (step, "train/grad_norm", 1.0 + 0.5 * math.exp(-step / 30))]
    return pts


def summaries(v: Variant, ppl: float, seed: int, params: tuple[int, int]) -> dict[str, float]:
    """The final summaries of a finished run; ``params``: its (total, gates) counts."""
    gate, mact, fattn = v.probes
    out = {"val/ppl": ppl, "val/loss": math.log(ppl), "bench/hellaswag": 30.0 - ppl + seed,
           "probe/max_activation": mact, "probe/first_token_attention": fattn,
           "stability/loss_spikes": 1.0 if v.name == "baseline" and seed == 0 else 0.0,
           "stability/max_grad_norm": 1.5, "params/total": float(params[0]),
           "params/gates": float(params[1])}
    for layer in range(N_LAYER):
        out[f"probe/max_activation/layer_{layer}"] = mact * (layer + 1) / N_LAYER
        out[f"probe/first_token_attention/layer_{layer}"] = fattn * (layer + 1) / N_LAYER
    if math.isfinite(ppl):  # a diverged run gets no long-context or extra benchmark eval
        out.update(longctx_summaries(ppl, seed))
        out.update({"bench/hellaswag/acc": 29.0 - ppl + seed,  # sub-metrics: not table columns
                    "bench/hellaswag/acc_norm": 31.0 - ppl + seed,
                    "bench/arc_easy": 50.0 + 2 * seed, "bench/arc_easy/acc": 50.0 + 2 * seed})
    if not math.isnan(gate):
        out["probe/gate_score_mean"] = gate
        for layer in range(N_LAYER):
            out[f"probe/gate_score_mean/layer_{layer}"] = gate
    return out


def longctx_summaries(ppl: float, seed: int) -> dict[str, float]:
    """``longctx/<method>/<f>x/...`` as trainer/final_eval.py writes them: no extension degrades
    with length (ppl * f), YaRN less (ppl * (1 + 0.25 (f - 1))); retrieval (YaRN only) 1/f + 0.1
    per seed. 1x is plain RoPE for every method, so only ``none`` is evaluated there."""
    out: dict[str, float] = {}
    for f in LONGCTX_FACTORS:
        out[f"longctx/none/{f}x/ppl"] = ppl * f
        out[f"longctx/none/{f}x/tail_ppl"] = ppl * f * 1.1
        if f > 1:
            out[f"longctx/yarn/{f}x/ppl"] = ppl * (1 + 0.25 * (f - 1))
            out[f"longctx/yarn/{f}x/tail_ppl"] = ppl * (1 + 0.25 * (f - 1)) * 1.1
            out[f"longctx/yarn/{f}x/retrieval_acc"] = 1 / f + 0.1 * seed
    return out


def _histogram(gate: float) -> dict[str, Any]:
    edges = [i / 10 for i in range(11)]
    counts = [float(round(100 * math.exp(-abs((lo + 0.05) - gate) * 10))) for lo in edges[:-1]]
    return {"edges": edges, "counts": counts}


def write_db(path: Path) -> str:
    """A new SQLite DB at ``path`` holding the single-LR sample (SWEEP) and the LR ladder
    (LR_SWEEP); returns its URL."""
    import results_db

    url = f"sqlite:///{path}"
    with results_db.open(url) as db:
        fill(db)
        fill_lr(db)
    return url


def fill(db: ResultsDB, sweep: str = SWEEP) -> dict[str, int]:
    """Write SAMPLE as sweep ``sweep``; returns {run name: run id}."""
    n = max(len(v.ends) for v in SAMPLE)
    cut = [{"variant": v.name, "seed": list(range(len(v.ends), n))}
           for v in SAMPLE if len(v.ends) < n]  # fewer seeds: key_elementwise has 2
    regs = synthdb.register(db, sweep_spec(sweep, {v.name: _gated(v.gates) for v in SAMPLE}, n,
                                           exclude=cut))
    by_variant = {v.name: (vi, v) for vi, v in enumerate(SAMPLE)}
    for r in regs:
        vi, v = by_variant[r.run.variant]
        _one_run(db, r, vi, v, r.run.seed, v.ppl[r.run.seed], v.ends[r.run.seed])
    return {r.run.name: r.id for r in regs}


def _one_run(db: ResultsDB, r: Registered, vi: int, v: Variant, seed: int, ppl: float | None,
             end: str) -> None:
    done = end not in ("pending", "running", "failed")
    arts: list[tuple[str, dict[str, Any]]] = [
        ("checkpoint_dir", {"path": f"runs/{SWEEP}/{v.name}-s{seed}/ckpt"})]
    if done and v.gates:
        arts.append(("gate_histogram", {"data": _histogram(v.probes[0])}))
    params = (r.row.params_total or 0, r.row.params_gates or 0)
    synthdb.play(db, r.id, end, host=HOST, points=loss_curve(vi, seed), artifacts=arts,
                 summaries=summaries(v, math.inf if ppl is None else ppl, seed, params)
                 if done else None, error=FAILURE,
                 traceback="Traceback (most recent call last):\n  File \"train.py\", "
                           f"line 1\n{FAILURE}")


# The LR ladder (sweep "demo-lr"): baseline vs G1 elementwise, 4 learning rates x 2 seeds.
# Final val/loss per (variant, lr) and seed: the baseline degrades at 4e-3 and diverges at
# 8e-3 (seed 1), the gated model stays within 5 % of its best up to 8e-3 -- the paper's
# Table 2 picture. Max activation grows with LR, much faster without the gate.
LR_SWEEP = "demo-lr"
LRS: tuple[float, ...] = (1e-3, 2e-3, 4e-3, 8e-3)
LR_LOSS: dict[str, tuple[tuple[float | None, float | None], ...]] = {
    "baseline": ((2.40, 2.42), (2.30, 2.33), (2.55, 2.60), (3.40, None)),
    "sdpa_elementwise": ((2.35, 2.36), (2.25, 2.27), (2.22, 2.24), (2.28, 2.31)),
}
LR_MAX_ACT: dict[str, tuple[float, ...]] = {"baseline": (300.0, 900.0, 4000.0, 120000.0),
                                            "sdpa_elementwise": (40.0, 60.0, 90.0, 150.0)}


def fill_lr(db: ResultsDB) -> dict[str, int]:
    """Write the LR ladder (LR_SWEEP); returns {run name: run id}."""
    variants = {v: _gated(next(x.gates for x in SAMPLE if x.name == v)) for v in LR_LOSS}
    regs = synthdb.register(db, sweep_spec(LR_SWEEP, variants, 2,
                                           axes={"train.lr": list(LRS)}))
    for r in regs:
        v, li = r.run.variant, LRS.index(r.run.spec.train.lr)
        _one_lr_run(db, r.id, list(LR_LOSS).index(v), v, li, r.run.seed,
                    LR_LOSS[v][li][r.run.seed])
    return {r.run.name: r.id for r in regs}


def _one_lr_run(db: ResultsDB, rid: int, vi: int, variant: str, li: int, seed: int,
                loss: float | None) -> None:
    final = math.inf if loss is None else loss
    pts = [(step, "train/loss", (5.0 - final) * math.exp(-step / 30) + final + 0.01 * seed)
           for step in range(1, STEPS + 1)]
    mact = LR_MAX_ACT[variant][li] * (1 + 0.1 * seed)
    summ = {"val/loss": final, "val/ppl": math.exp(final) if loss is not None else math.inf,
            "probe/max_activation": mact, "stability/loss_spikes": float(li >= 2 and vi == 0),
            "stability/max_grad_norm": 1.0 + li, "stability/diverged": float(loss is None)}
    for layer in range(N_LAYER):
        summ[f"probe/max_activation/layer_{layer}"] = mact * (layer + 1) / N_LAYER
    synthdb.play(db, rid, "diverged" if loss is None else "succeeded", host=HOST,
                 points=pts + [(STEPS, "val/loss", final)], summaries=summ)


# Sweep "evals": evaluation series of 5 points per run, whose EMA would end far
# from the measured value; "wide": 16 variants x 1 seed with per-layer probes and
# 50-bin gate-score histograms (the per-layer charts, legends and histograms at 16 variants).
EVAL_SWEEP = "evals"
EVAL_VAL: dict[tuple[str, int], list[float]] = {
    ("baseline", 0): [4.0, 3.0, 2.2, 1.8, 1.50], ("baseline", 1): [4.1, 3.1, 2.3, 1.9, 1.52],
    ("sdpa_elementwise", 0): [3.9, 2.8, 2.0, 1.6, 1.40],
    ("sdpa_elementwise", 1): [4.0, 2.9, 2.1, 1.7, 1.42]}
WIDE_SWEEP = "wide"
WIDE_VARIANTS: tuple[str, ...] = ("baseline", *(f"gate_variant_{i:02d}" for i in range(1, 16)))
WIDE_LAYERS = 4
WIDE_BINS = 50


def fill_evals(db: ResultsDB) -> dict[tuple[str, int], int]:
    """EVAL_SWEEP: baseline vs G1 elementwise x 2 seeds, val/loss at steps 20..100 (EVAL_VAL)."""
    variants = {v: _gated(SAMPLE[0 if v == "baseline" else 1].gates)
                for v in dict.fromkeys(v for v, _ in EVAL_VAL)}
    regs = synthdb.register(db, sweep_spec(EVAL_SWEEP, variants, 2))
    for r in regs:
        vals = EVAL_VAL[(r.run.variant, r.run.seed)]
        pts = [(t, "train/loss", 5.0 * math.exp(-t / 30) + 1.4 + 0.3 * (t % 2))
               for t in range(1, STEPS + 1)]
        pts += [(20 * (i + 1), "val/loss", x) for i, x in enumerate(vals)]
        synthdb.play(db, r.id, host=HOST, points=pts,
                     summaries={"val/loss": vals[-1], "val/ppl": math.exp(vals[-1])})
    return {(r.run.variant, r.run.seed): r.id for r in regs}


def fill_wide(db: ResultsDB) -> dict[tuple[str, int], int]:
    """WIDE_SWEEP: WIDE_VARIANTS x seed 0, per-layer probes and a WIDE_BINS-bin histogram."""
    # distinct configs (one config is one run: a fingerprint may not repeat): d_ff per variant
    variants = {v: {**_gated(SAMPLE[1].gates), "model.d_ff": 176 + 16 * i} if i else {}
                for i, v in enumerate(WIDE_VARIANTS)}
    regs = synthdb.register(db, sweep_spec(WIDE_SWEEP, variants, 1))
    edges = [i / WIDE_BINS for i in range(WIDE_BINS + 1)]
    for r in regs:
        i = WIDE_VARIANTS.index(r.run.variant)
        summ = {"val/ppl": 10.0 - 0.05 * i, "val/loss": math.log(10.0 - 0.05 * i)}
        for layer in range(WIDE_LAYERS):
            summ[f"probe/max_activation/layer_{layer}"] = (300.0 if i == 0 else 40.0 + i) * \
                (layer + 1)
            summ[f"probe/first_token_attention/layer_{layer}"] = 0.05 + 0.02 * i + 0.01 * layer
            if i:
                summ[f"probe/gate_score_mean/layer_{layer}"] = 0.1 + 0.03 * i
        arts: list[tuple[str, dict[str, Any]]] = []
        if i:
            center = 0.1 + 0.03 * i
            counts = [float(round(100 * math.exp(-abs(lo + 0.01 - center) * 20)))
                      for lo in edges[:-1]]
            arts.append(("gate_histogram", {"data": {"edges": edges, "counts": counts}}))
        synthdb.play(db, r.id, host=HOST, summaries=summ, artifacts=arts)
    return {(r.run.variant, r.run.seed): r.id for r in regs}


if __name__ == "__main__":
    import results_db

    url = sys.argv[1] if len(sys.argv) > 1 else None
    db = results_db.open(url)
    print(fill(db), fill_lr(db), fill_evals(db), fill_wide(db))
