"""A small, fully known sweep written through results_db's REAL writer API.

Used by the dashboard tests (their expected numbers are computed by hand from ``SAMPLE``), the
browser test and the render benchmark, and handy to look at the app without training:

    python -m tests.support.dashboard_sample sqlite:///demo.db && GATESWEEP_DB=sqlite:///demo.db \
        streamlit run dashboard/app.py
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from results_db import ResultsDB

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
    params_gates: int
    nonlinearity: str = "none"
    extra: dict[str, Any] = field(default_factory=dict)


SAMPLE: tuple[Variant, ...] = (
    Variant("baseline", (), (10.0, 10.2, 10.4), ("succeeded",) * 3, (math.nan, 300.0, 0.45), 0),
    Variant("sdpa_elementwise", ({"position": "G1"},), (9.0, 9.1, 9.2), ("succeeded",) * 3,
            (0.12, 40.0, 0.05), 8192),
    Variant("sdpa_headwise", ({"position": "G1", "granularity": "headwise"},), (9.5, 9.7, 9.9),
            ("succeeded",) * 3, (0.18, 60.0, 0.08), 512),
    Variant("value_elementwise", ({"position": "G2"},), (9.8, 10.0, None),
            ("succeeded", "succeeded", "failed"), (0.22, 120.0, 0.30), 4096),
    Variant("sdpa_ns_sigmoid", ({"position": "G1", "activation": "ns_sigmoid"},),
            (None, 11.0, 11.4), ("diverged", "succeeded", "succeeded"), (0.65, 250.0, 0.44), 8192),
    Variant("key_elementwise", ({"position": "G3"},), (None, None), ("running", "pending"),
            (0.3, 200.0, 0.4), 4096),
)
N_LAYER = 2
LONGCTX_FACTORS = (1, 2, 4)


def config(v: Variant, seed: int) -> dict[str, Any]:
    """The RunSpec JSON of one run (the fields the DB derives its dimension columns from)."""
    return {"name": f"{v.name}-s{seed}", "sweep": SWEEP, "seed": seed,
            "model": {"vocab_size": 256, "n_layer": N_LAYER, "d_model": 64, "n_head": 4,
                      "n_kv_head": 2, "head_dim": 16, "d_ff": 176, "gates": list(v.gates),
                      "nonlinearity": v.nonlinearity},
            "train": {"steps": STEPS, "lr": 3e-3, "batch_size": 16}}


def _fingerprint(cfg: dict[str, Any]) -> str:
    doc = {k: v for k, v in cfg.items() if k != "name"}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


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


def summaries(v: Variant, ppl: float, seed: int) -> dict[str, float]:
    gate, mact, fattn = v.probes
    out = {"val/ppl": ppl, "val/loss": math.log(ppl), "bench/hellaswag": 30.0 - ppl + seed,
           "probe/max_activation": mact, "probe/first_token_attention": fattn,
           "stability/loss_spikes": 1.0 if v.name == "baseline" and seed == 0 else 0.0,
           "stability/max_grad_norm": 1.5, "params/total": 100_000.0 + v.params_gates,
           "params/gates": float(v.params_gates)}
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


def fill(db: Any, sweep: str = SWEEP) -> dict[str, int]:
    """Write SAMPLE into ``db`` (a results_db.ResultsDB); returns {run name: run id}."""
    from results_db import NewRun

    sweep_id = db.ensure_sweep(sweep, "# demo sweep written by tests.support.dashboard_sample",
                               "dashboard sample")
    news = [NewRun(name=f"{v.name}-s{seed}", fingerprint=_fingerprint(config(v, seed)),
                   variant=v.name, seed=seed, config=config(v, seed))
            for v in SAMPLE for seed in range(len(v.ends))]
    res = db.register_runs(sweep_id, news)
    ids = {r.name: r.id for r in res.to_run + res.cached}
    for vi, v in enumerate(SAMPLE):
        for seed, (ppl, end) in enumerate(zip(v.ppl, v.ends, strict=True)):
            _one_run(db, ids[f"{v.name}-s{seed}"], vi, v, seed, ppl, end)
    return ids


def _one_run(db: Any, rid: int, vi: int, v: Variant, seed: int, ppl: float | None,
             end: str) -> None:
    if end == "pending":
        return
    att = db.start_attempt(rid, host="sample-host")
    db.add_artifact(rid, att.id, "checkpoint_dir", path=f"runs/{SWEEP}/{v.name}-s{seed}/ckpt")
    db.log_metrics(rid, att.id, loss_curve(vi, seed))
    if end == "running":
        return
    if end == "failed":
        db.finish_attempt(att.id, "failed", error="RuntimeError: injected failure at step 40",
                          traceback="Traceback (most recent call last):\n  File \"train.py\", "
                                    "line 1\nRuntimeError: injected failure at step 40")
        return
    db.log_summaries(rid, att.id, summaries(v, math.inf if ppl is None else ppl, seed))
    if v.gates:
        db.add_artifact(rid, att.id, "gate_histogram", data=_histogram(v.probes[0]))
    db.finish_attempt(att.id, end)


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


def lr_config(variant: str, lr: float, seed: int) -> dict[str, Any]:
    v = next(x for x in SAMPLE if x.name == variant)
    cfg = config(v, seed)
    cfg.update(name=f"{variant}-lr{lr:g}-s{seed}", sweep=LR_SWEEP)
    cfg["train"] = {**cfg["train"], "lr": lr}
    return cfg


def fill_lr(db: Any) -> dict[str, int]:
    """Write the LR ladder (LR_SWEEP) through the writer API; returns {run name: run id}."""
    from results_db import NewRun

    sweep_id = db.ensure_sweep(LR_SWEEP, "# LR ladder written by tests.support.dashboard_sample",
                               "LR ladder")
    news = [NewRun(name=c["name"], fingerprint=_fingerprint(c), variant=v, seed=seed, config=c)
            for v in LR_LOSS for lr in LRS for seed in (0, 1)
            for c in (lr_config(v, lr, seed),)]
    res = db.register_runs(sweep_id, news)
    ids = {r.name: r.id for r in res.to_run + res.cached}
    for vi, (v, losses) in enumerate(LR_LOSS.items()):
        for li, lr in enumerate(LRS):
            for seed in (0, 1):
                rid = ids[f"{v}-lr{lr:g}-s{seed}"]
                _one_lr_run(db, rid, vi, v, li, seed, losses[li][seed])
    return ids


def _one_lr_run(db: Any, rid: int, vi: int, variant: str, li: int, seed: int,
                loss: float | None) -> None:
    att = db.start_attempt(rid, host="sample-host")
    final = math.inf if loss is None else loss
    pts = [(step, "train/loss", (5.0 - final) * math.exp(-step / 30) + final + 0.01 * seed)
           for step in range(1, STEPS + 1)]
    db.log_metrics(rid, att.id, pts + [(STEPS, "val/loss", final)])
    mact = LR_MAX_ACT[variant][li] * (1 + 0.1 * seed)
    summ = {"val/loss": final, "val/ppl": math.exp(final) if loss is not None else math.inf,
            "probe/max_activation": mact, "stability/loss_spikes": float(li >= 2 and vi == 0),
            "stability/max_grad_norm": 1.0 + li, "stability/diverged": float(loss is None)}
    for layer in range(N_LAYER):
        summ[f"probe/max_activation/layer_{layer}"] = mact * (layer + 1) / N_LAYER
    db.log_summaries(rid, att.id, summ)
    db.finish_attempt(att.id, "diverged" if loss is None else "succeeded")


# Sweep "evals" (issue 22.1): evaluation series of 5 points per run, whose EMA would end far
# from the measured value; "wide" (issue 22.6): 16 variants x 1 seed with per-layer probes and
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


def _named_runs(db: ResultsDB, sweep: str, runs: list[tuple[str, int, dict[str, Any]]]) -> dict:
    """Register (variant, seed, config) runs of ``sweep``; returns {(variant, seed): id}."""
    from results_db import NewRun

    sid = db.ensure_sweep(sweep, f"# {sweep}: written by tests.support.dashboard_sample", sweep)
    news = [NewRun(name=f"{v}-s{s}", fingerprint=f"{sweep}-{v}-{s}", variant=v, seed=s,
                   config={**c, "name": f"{v}-s{s}", "sweep": sweep}) for v, s, c in runs]
    res = db.register_runs(sid, news)
    by_name = {r.name: r.id for r in res.to_run + res.cached}
    return {(v, s): by_name[f"{v}-s{s}"] for v, s, _ in runs}


def fill_evals(db: ResultsDB) -> dict[tuple[str, int], int]:
    """EVAL_SWEEP: baseline vs G1 elementwise x 2 seeds, val/loss at steps 20..100 (EVAL_VAL)."""
    runs = [(v, s, config(SAMPLE[0 if v == "baseline" else 1], s)) for v, s in EVAL_VAL]
    ids = _named_runs(db, EVAL_SWEEP, runs)
    for (v, s), rid in ids.items():
        att = db.start_attempt(rid, host="sample-host")
        pts = [(t, "train/loss", 5.0 * math.exp(-t / 30) + 1.4 + 0.3 * (t % 2))
               for t in range(1, STEPS + 1)]
        pts += [(20 * (i + 1), "val/loss", x) for i, x in enumerate(EVAL_VAL[(v, s)])]
        db.log_metrics(rid, att.id, pts)
        final = EVAL_VAL[(v, s)][-1]
        db.log_summaries(rid, att.id, {"val/loss": final, "val/ppl": math.exp(final)})
        db.finish_attempt(att.id, "succeeded")
    return ids


def _wide_config(i: int) -> dict[str, Any]:
    cfg = config(SAMPLE[0 if i == 0 else 1], 0)
    if i:
        cfg["model"] = {**cfg["model"], "d_ff": 176 + 16 * i}
    return cfg


def fill_wide(db: ResultsDB) -> dict[tuple[str, int], int]:
    """WIDE_SWEEP: WIDE_VARIANTS x seed 0, per-layer probes and a WIDE_BINS-bin histogram."""
    # distinct configs (the DB groups seeds by config, not by name): d_ff differs per variant
    runs = [(v, 0, _wide_config(i)) for i, v in enumerate(WIDE_VARIANTS)]
    ids = _named_runs(db, WIDE_SWEEP, runs)
    edges = [i / WIDE_BINS for i in range(WIDE_BINS + 1)]
    for i, v in enumerate(WIDE_VARIANTS):
        rid = ids[(v, 0)]
        att = db.start_attempt(rid, host="sample-host")
        summ = {"val/ppl": 10.0 - 0.05 * i, "val/loss": math.log(10.0 - 0.05 * i)}
        for layer in range(WIDE_LAYERS):
            summ[f"probe/max_activation/layer_{layer}"] = (300.0 if i == 0 else 40.0 + i) * \
                (layer + 1)
            summ[f"probe/first_token_attention/layer_{layer}"] = 0.05 + 0.02 * i + 0.01 * layer
            if i:
                summ[f"probe/gate_score_mean/layer_{layer}"] = 0.1 + 0.03 * i
        db.log_summaries(rid, att.id, summ)
        if i:
            center = 0.1 + 0.03 * i
            counts = [float(round(100 * math.exp(-abs(lo + 0.01 - center) * 20)))
                      for lo in edges[:-1]]
            db.add_artifact(rid, att.id, "gate_histogram", data={"edges": edges,
                                                                 "counts": counts})
        db.finish_attempt(att.id, "succeeded")
    return ids


if __name__ == "__main__":
    import results_db

    url = sys.argv[1] if len(sys.argv) > 1 else None
    db = results_db.open(url)
    print(fill(db), fill_lr(db), fill_evals(db), fill_wide(db))
