"""Results DBs of the shapes real users have, for the dashboard's edge-case tests
(tests/dashboard/test_dashboard_edge_cases.py): each one written through results_db's REAL writer API
(ensure_sweep, register_runs, start_attempt, log_metrics, log_summaries, finish_attempt), or,
for the unreadable ones, a real file that is not a current results DB.

``build(case, path)`` writes case ``case`` at ``path`` and returns its URL; ``CASES`` lists
them. Every sweep is called ``SWEEP``. Runs are small RunSpec-shaped configs
(tests.support.synth.gate_config), so the DB derives the gate/LR dimension columns as usual.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import results_db
from results_db import NewRun, ResultsDB
from tests.support.synth import gate_config

SWEEP = "edge"
G1: list[dict[str, Any]] = [{"position": "G1"}]
G2: list[dict[str, Any]] = [{"position": "G2"}]
# user-supplied names that break markdown/tables when not escaped (shown literally)
ODD_NAME = "gate | *bold* _it_ `tick` [link](x) <b>ü→ 门</b> # h"


def _curve(final: float, n: int = 20) -> list[tuple[int, str, float]]:
    return [(s, "train/loss", final + 2.0 * math.exp(-s / 5)) for s in range(1, n + 1)]


def _summ(ppl: float, **extra: float) -> dict[str, float]:
    return {"val/ppl": ppl, "val/loss": math.log(ppl) if ppl > 0 else ppl,
            "probe/max_activation": 100.0, "probe/max_activation/layer_0": 50.0,
            "probe/first_token_attention": 0.3, "stability/loss_spikes": 0.0, **extra}


class Writer:
    """One sweep, written run by run through the writer API."""

    def __init__(self, db: ResultsDB) -> None:
        self.db = db
        self.sweep_id = db.ensure_sweep(SWEEP, "# edge-case sweep", "dashboard edge cases")

    def run(self, variant: str, seed: int = 0, *, gates: Sequence[dict[str, Any]] = (),
            lr: float = 3e-3, status: str = "succeeded", ppl: float | None = 10.0,
            points: list[tuple[int, str, float]] | None = None,
            summaries: dict[str, float] | None = None, **model: Any) -> int:
        """Register one run and play its attempt; ``status`` pending registers only.
        ``points`` None: a 20-step loss curve ending at log(ppl); [] logs none. ``model``:
        extra model keys (configs that differ only in the variant name are one seed group)."""
        cfg = gate_config(list(gates), lr=lr, seed=seed, **model)
        name = f"{variant}-lr{lr:g}-s{seed}"
        cfg["name"] = name
        res = self.db.register_runs(self.sweep_id, [NewRun(
            name=name, fingerprint=f"{SWEEP}:{name}", variant=variant, seed=seed, config=cfg)])
        rid = (res.to_run + res.cached)[0].id
        if status == "pending":
            return rid
        att = self.db.start_attempt(rid, host="edge-host")
        final = math.log(ppl) if ppl and math.isfinite(ppl) and ppl > 0 else math.nan
        pts = _curve(final) if points is None else points
        if pts:
            self.db.log_metrics(rid, att.id, pts)
        if status == "running":
            return rid
        if status == "failed":
            self.db.finish_attempt(att.id, "failed", error="RuntimeError: CUDA out of memory",
                                   traceback="Traceback (most recent call last):\n"
                                             "RuntimeError: CUDA out of memory")
            return rid
        if summaries is not None or ppl is not None:
            self.db.log_summaries(rid, att.id, summaries if summaries is not None
                                  else _summ(ppl or math.nan))
        self.db.finish_attempt(att.id, status)
        return rid


def _empty(w: Writer) -> None:
    """The schema and no sweep: nothing is written (the sweep is never created)."""


def _all_pending(w: Writer) -> None:
    for v, g in (("baseline", ()), ("gated", G1)):
        for seed in (0, 1):
            w.run(v, seed, gates=g, status="pending")


def _all_failed(w: Writer) -> None:
    for v, g in (("baseline", ()), ("gated", G1)):
        for seed in (0, 1):
            w.run(v, seed, gates=g, status="failed")


def _all_diverged(w: Writer) -> None:
    inf, nan = math.inf, math.nan
    pts = [(1, "train/loss", 5.0), (2, "train/loss", 1e30), (3, "train/loss", inf),
           (4, "train/loss", nan)]
    for v, g in (("baseline", ()), ("gated", G1)):
        for seed in (0, 1):
            w.run(v, seed, gates=g, status="diverged", points=pts,
                  summaries={"val/loss": nan, "val/ppl": inf, "stability/diverged": 1.0,
                             "stability/loss_spikes": 3.0, "probe/max_activation": inf})


def _only_baseline_finished(w: Writer) -> None:
    for seed in (0, 1):
        w.run("baseline", seed, ppl=10.0 + seed)
        w.run("gated", seed, gates=G1, status="failed" if seed == 0 else "running")
        w.run("value", seed, gates=G2, status="pending")


def _no_baseline(w: Writer) -> None:
    for seed in (0, 1):
        w.run("sdpa", seed, gates=G1, ppl=9.0 + seed)
        w.run("value", seed, gates=G2, ppl=9.5 + seed)


def _single_variant(w: Writer) -> None:
    for seed in (0, 1, 2):
        w.run("baseline", seed, ppl=10.0 + seed * 0.1)


def _single_seed(w: Writer) -> None:
    w.run("baseline", ppl=10.0)
    w.run("sdpa", gates=G1, ppl=5.0)  # far better, but one seed: no claim
    w.run("value", gates=G2, ppl=20.0)


def _variant_without_finished_runs(w: Writer) -> None:
    for seed in (0, 1):
        w.run("baseline", seed, ppl=10.0 + seed * 0.2)
        w.run("sdpa", seed, gates=G1, ppl=9.0 + seed * 0.1)
        w.run("value", seed, gates=G2, status="failed")


def _odd_values(w: Writer) -> None:
    """NaN / inf / 1e30 in summaries and curves, a run with no points, a 1-point curve."""
    inf, nan = math.inf, math.nan
    for seed in (0, 1):
        w.run("baseline", seed, ppl=10.0 + seed * 0.2)
        w.run("huge", seed, gates=G1, ppl=1e30 * (1 + seed),
              points=[(1, "train/loss", 1e30), (2, "train/loss", inf), (3, "train/loss", nan),
                      (4, "train/loss", 2.0)])
    w.run("nopoints", 0, gates=G2, ppl=9.0, points=[])
    w.run("nopoints", 1, gates=G2, ppl=9.2, points=[(7, "train/loss", 3.0)])  # one point
    w.run("nanval", 0, gates=[{"position": "G3"}],
          summaries={"val/ppl": nan, "val/loss": nan, "probe/max_activation": -inf,
                     "probe/max_activation/layer_0": nan, "stability/loss_spikes": inf})
    w.run("nanval", 1, gates=[{"position": "G3"}],
          summaries={"val/ppl": inf, "val/loss": inf})


def _many_variants(w: Writer) -> None:
    """200 variants with names long, unicode, with spaces and markdown/table characters;
    two seeds for the baseline and the first few, one for the rest (keeps the DB small)."""
    w.run("baseline", 0, ppl=10.0)
    w.run("baseline", 1, ppl=10.1)
    for i in range(199):
        name = f"{ODD_NAME} #{i:03d} " + "ー" * (i % 7) + " long-name-" * (i % 3)
        gates = [{"position": f"G{1 + i % 5}", "granularity": ("elementwise", "headwise")[i % 2]}]
        for seed in (0, 1) if i < 5 else (0,):
            w.run(name, seed, gates=gates, ppl=9.0 + i / 100 + seed * 0.05, rep=i)


def _lr_all_diverged(w: Writer) -> None:
    """An LR ladder: the baseline diverges at its top LR for every seed; one gated variant
    diverges at every LR (no stable LR at all)."""
    lrs = (1e-3, 2e-3, 4e-3)
    for li, lr in enumerate(lrs):
        for seed in (0, 1):
            if li == 2:
                w.run("baseline", seed, lr=lr, status="diverged", ppl=math.inf,
                      summaries={"val/loss": math.inf, "val/ppl": math.inf,
                                 "stability/diverged": 1.0})
            else:
                w.run("baseline", seed, lr=lr, ppl=10.0 - li + seed * 0.1)
            w.run("sdpa", seed, gates=G1, lr=lr, ppl=9.0 - li + seed * 0.1)
            w.run("hopeless", seed, gates=G2, lr=lr, status="diverged",
                  summaries={"val/loss": math.nan, "val/ppl": math.inf,
                             "stability/diverged": 1.0})


FILLERS: dict[str, Callable[[Writer], None]] = {
    "empty": _empty, "all_pending": _all_pending, "all_failed": _all_failed,
    "all_diverged": _all_diverged, "only_baseline_finished": _only_baseline_finished,
    "no_baseline": _no_baseline, "single_variant": _single_variant,
    "single_seed": _single_seed, "variant_without_finished_runs": _variant_without_finished_runs,
    "odd_values": _odd_values, "many_variants": _many_variants,
    "lr_all_diverged": _lr_all_diverged,
}
UNREADABLE = ("outdated_schema", "not_a_db", "foreign_sqlite")
CASES: tuple[str, ...] = (*FILLERS, *UNREADABLE)


def build(case: str, path: Path) -> str:
    """Write case ``case`` as the SQLite file ``path``; returns its URL."""
    url = f"sqlite:///{path}"
    if case == "outdated_schema":  # a DB left at the first migration
        results_db.upgrade(url, "0001")
    elif case == "not_a_db":
        path.write_text("name,value\nthis is a CSV, not a results DB\n")
    elif case == "foreign_sqlite":  # an SQLite file of some other tool
        import sqlite3

        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    else:
        db = results_db.open(url)
        try:
            if case != "empty":
                FILLERS[case](Writer(db))
        finally:
            db.close()
    return url
