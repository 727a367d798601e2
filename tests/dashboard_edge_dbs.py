"""Results DBs of the shapes real users have, for the dashboard's edge-case tests
(tests/dashboard/test_dashboard_edge_cases.py): each case's runs are data (``Run``), registered
as one sweep by the real submit path (tests.support.synthdb) and played through the writer API;
the unreadable cases are real files that are not a current results DB.

``build(case, path)`` writes case ``case`` at ``path`` and returns its URL; ``CASES`` lists
them. Every sweep is called ``SWEEP``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import results_db
from results_db import ResultsDB
from tests.support import synthdb

SWEEP = "edge"
G1: list[dict[str, Any]] = [{"position": "G1"}]
G2: list[dict[str, Any]] = [{"position": "G2"}]
# user-supplied names that break markdown/tables when not escaped (shown literally)
ODD_NAME = "gate | *bold* _it_ `tick` [link](x) <b>ü→ 门</b> # h"
MODEL: dict[str, Any] = {"n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 4, "d_ff": 172,
                         "nonlinearity": "none"}


def _curve(final: float, n: int = 20) -> list[tuple[int, str, float]]:
    return [(s, "train/loss", final + 2.0 * math.exp(-s / 5)) for s in range(1, n + 1)]


def _summ(ppl: float, **extra: float) -> dict[str, float]:
    return {"val/ppl": ppl, "val/loss": math.log(ppl) if ppl > 0 else ppl,
            "probe/max_activation": 100.0, "probe/max_activation/layer_0": 50.0,
            "probe/first_token_attention": 0.3, "stability/loss_spikes": 0.0, **extra}


@dataclass(frozen=True)
class Run:
    """One run of a case. ``status`` pending registers only; ``points`` None: a 20-step loss
    curve ending at log(ppl), [] logs none; ``model``: model keys beside the gates (runs
    whose configs are equal are one run: a fingerprint names a config)."""

    variant: str
    seed: int = 0
    gates: Sequence[dict[str, Any]] = ()
    lr: float = 3e-3
    status: str = "succeeded"
    ppl: float | None = 10.0
    points: list[tuple[int, str, float]] | None = None
    summaries: dict[str, float] | None = None
    model: dict[str, Any] = field(default_factory=dict)


def sweep_spec(runs: Sequence[Run]) -> tuple[dict[str, Any], dict[str, str]]:
    """(one sweep file holding exactly ``runs``, {file variant: variant label}): variants x
    LRs x seeds, the combinations no run asks for excluded."""
    keys: dict[str, str] = {}  # variant -> its name in the file (free text gets a stand-in)
    deltas: dict[str, dict[str, Any]] = {}
    for r in runs:
        key = keys.setdefault(r.variant, r.variant if synthdb.VARIANT_NAME.fullmatch(r.variant)
                              else f"v{len(keys)}")
        delta = {**({"model.gates": [dict(g) for g in r.gates]} if r.gates else {}),
                 **{f"model.{k}": v for k, v in r.model.items()}}
        if deltas.setdefault(key, delta) != delta:
            raise ValueError(f"variant {r.variant!r}: its runs differ in more than LR and seed")
    lrs = list(dict.fromkeys(r.lr for r in runs))
    seeds = sorted({r.seed for r in runs})
    wanted = {(keys[r.variant], r.lr, r.seed) for r in runs}
    spec: dict[str, Any] = {"name": SWEEP, "description": "dashboard edge cases",
                            "base": {"model": MODEL, "train": {"steps": 100}},
                            "variants": deltas, "axes": {"train.lr": lrs}, "seeds": seeds}
    # one rule per (LR, seed) that some variants lack (few rules: expand tries each per row)
    exclude = [{"variant": ks, "train.lr": lr, "seed": s} for lr, s in product(lrs, seeds)
               if (ks := [k for k in deltas if (k, lr, s) not in wanted])]
    if exclude:
        spec["exclude"] = exclude
    return spec, {k: v for v, k in keys.items() if k != v}


class Writer:
    """Runs of one sweep, registered and played through the real path."""

    def __init__(self, db: ResultsDB) -> None:
        self.db = db

    def write(self, runs: Sequence[Run]) -> list[int]:
        """Register ``runs`` as one sweep file and play each; returns their ids, in order."""
        spec, labels = sweep_spec(runs)
        regs = synthdb.register(self.db, spec, labels=labels)
        ids = {(g.run.variant, g.run.spec.train.lr, g.run.seed): g.id for g in regs}
        out = [ids[(r.variant, r.lr, r.seed)] for r in runs]
        for r, rid in zip(runs, out, strict=True):
            self._play(r, rid)
        return out

    def run(self, variant: str, seed: int = 0, *, gates: Sequence[dict[str, Any]] = (),
            lr: float = 3e-3, status: str = "succeeded", ppl: float | None = 10.0,
            points: list[tuple[int, str, float]] | None = None,
            summaries: dict[str, float] | None = None, **model: Any) -> int:
        """One run (see ``Run``), written now; returns its id."""
        return self.write([Run(variant, seed, gates, lr, status, ppl, points, summaries,
                               model)])[0]

    def _play(self, r: Run, rid: int) -> None:
        final = math.log(r.ppl) if r.ppl and math.isfinite(r.ppl) and r.ppl > 0 else math.nan
        summaries = None if r.status in ("pending", "running", "failed") else \
            r.summaries if r.summaries is not None else \
            _summ(r.ppl) if r.ppl is not None else None
        synthdb.play(self.db, rid, r.status, host="edge-host",
                     points=_curve(final) if r.points is None else r.points,
                     summaries=summaries, error="RuntimeError: CUDA out of memory")


def _empty() -> list[Run]:
    """The schema and no sweep: nothing is written (the sweep is never created)."""
    return []


def _all_pending() -> list[Run]:
    return [Run(v, seed, g, status="pending")
            for v, g in (("baseline", ()), ("gated", G1)) for seed in (0, 1)]


def _just_started() -> list[Run]:
    """Runs started that have logged nothing yet: the first minutes of every sweep."""
    return [Run(v, seed, g, status="running", points=[])
            for v, g in (("baseline", ()), ("gated", G1)) for seed in (0, 1)]


def _all_failed() -> list[Run]:
    return [Run(v, seed, g, status="failed")
            for v, g in (("baseline", ()), ("gated", G1)) for seed in (0, 1)]


def _all_diverged() -> list[Run]:
    inf, nan = math.inf, math.nan
    pts = [(1, "train/loss", 5.0), (2, "train/loss", 1e30), (3, "train/loss", inf),
           (4, "train/loss", nan)]
    summ = {"val/loss": nan, "val/ppl": inf, "stability/diverged": 1.0,
            "stability/loss_spikes": 3.0, "probe/max_activation": inf}
    return [Run(v, seed, g, status="diverged", points=pts, summaries=summ)
            for v, g in (("baseline", ()), ("gated", G1)) for seed in (0, 1)]


def _only_baseline_finished() -> list[Run]:
    return [run for seed in (0, 1) for run in (
        Run("baseline", seed, ppl=10.0 + seed),
        Run("gated", seed, G1, status="failed" if seed == 0 else "running"),
        Run("value", seed, G2, status="pending"))]


def _no_baseline() -> list[Run]:
    return [run for seed in (0, 1) for run in (Run("sdpa", seed, G1, ppl=9.0 + seed),
                                               Run("value", seed, G2, ppl=9.5 + seed))]


def _single_variant() -> list[Run]:
    return [Run("baseline", seed, ppl=10.0 + seed * 0.1) for seed in (0, 1, 2)]


def _single_seed() -> list[Run]:
    return [Run("baseline", ppl=10.0),
            Run("sdpa", gates=G1, ppl=5.0),  # far better, but one seed: no claim
            Run("value", gates=G2, ppl=20.0)]


def _variant_without_finished_runs() -> list[Run]:
    return [run for seed in (0, 1) for run in (Run("baseline", seed, ppl=10.0 + seed * 0.2),
                                               Run("sdpa", seed, G1, ppl=9.0 + seed * 0.1),
                                               Run("value", seed, G2, status="failed"))]


def _odd_values() -> list[Run]:
    """NaN / inf / 1e30 in summaries and curves, a run with no points, a 1-point curve."""
    inf, nan = math.inf, math.nan
    runs = [run for seed in (0, 1) for run in (
        Run("baseline", seed, ppl=10.0 + seed * 0.2),
        Run("huge", seed, G1, ppl=1e30 * (1 + seed),
            points=[(1, "train/loss", 1e30), (2, "train/loss", inf), (3, "train/loss", nan),
                    (4, "train/loss", 2.0)]))]
    g3 = [{"position": "G3"}]
    return runs + [
        Run("nopoints", 0, G2, ppl=9.0, points=[]),
        Run("nopoints", 1, G2, ppl=9.2, points=[(7, "train/loss", 3.0)]),  # one point
        Run("nanval", 0, g3, summaries={"val/ppl": nan, "val/loss": nan,
                                        "probe/max_activation": -inf,
                                        "probe/max_activation/layer_0": nan,
                                        "stability/loss_spikes": inf}),
        Run("nanval", 1, g3, summaries={"val/ppl": inf, "val/loss": inf})]


def _many_variants() -> list[Run]:
    """200 variants with names long, unicode, with spaces and markdown/table characters (the
    writer API takes any name; synthdb registers them as labels); two seeds for the baseline
    and the first few, one for the rest (keeps the DB small)."""
    runs = [Run("baseline", 0, ppl=10.0), Run("baseline", 1, ppl=10.1)]
    for i in range(199):
        name = f"{ODD_NAME} #{i:03d} " + "ー" * (i % 7) + " long-name-" * (i % 3)
        pos = f"G{1 + i % 5}"  # G5 (after o_proj) has no heads: elementwise only
        gates = [{"position": pos, "granularity": "headwise" if i % 2 and pos != "G5"
                  else "elementwise"}]
        # 10 gate designs over 199 variants: rope_base keeps each variant's config its own
        runs += [Run(name, seed, gates, ppl=9.0 + i / 100 + seed * 0.05,
                     model={"rope_base": 10000.0 + i}) for seed in ((0, 1) if i < 5 else (0,))]
    return runs


def _lr_all_diverged() -> list[Run]:
    """An LR ladder: the baseline diverges at its top LR for every seed; one gated variant
    diverges at every LR (no stable LR at all)."""
    runs = []
    for li, lr in enumerate((1e-3, 2e-3, 4e-3)):
        for seed in (0, 1):
            runs.append(Run("baseline", seed, lr=lr, status="diverged", ppl=math.inf,
                            summaries={"val/loss": math.inf, "val/ppl": math.inf,
                                       "stability/diverged": 1.0}) if li == 2 else
                        Run("baseline", seed, lr=lr, ppl=10.0 - li + seed * 0.1))
            runs.append(Run("sdpa", seed, G1, lr=lr, ppl=9.0 - li + seed * 0.1))
            runs.append(Run("hopeless", seed, G2, lr=lr, status="diverged",
                            summaries={"val/loss": math.nan, "val/ppl": math.inf,
                                       "stability/diverged": 1.0}))
    return runs


FILLERS: dict[str, Callable[[], list[Run]]] = {
    "empty": _empty, "all_pending": _all_pending, "just_started": _just_started,
    "all_failed": _all_failed,
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
            if runs := FILLERS[case]():
                Writer(db).write(runs)
        finally:
            db.close()
    return url
