"""The Decide page shows what pairing bought each row (dashboard/views/decide.py rows_frame):
the pairing correlation and the measured seed multiplier of db.decide_rows, as computed by
results_db/analysis/pairing.py -- the page formats them, it computes nothing."""

from __future__ import annotations

import polars as pl

from dashboard.views.decide import PAIR_CORR, SEED_MULTIPLIER, rows_frame
from orchestrator.sweep.spec import loads_spec
from results_db.analysis.pairing import pairing
from results_db.analysis.sequential import read_rows

TEXT = """name: d
base: {model: {preset: tiny}}
variants: {baseline: {}, g1: {gate.position: G1}}
decide: {margin: 0.02, first_seeds: 3, max_seeds: 8, budget: {runs: 40}}
"""
BASE, G1 = [10.0, 12.0, 11.0, 13.0, 9.0], [9.5, 11.0, 10.8, 12.1, 8.9]


def test_rows_show_the_pairing_correlation_and_seed_multiplier() -> None:
    spec = loads_spec(TEXT)[0].decide
    assert spec is not None
    values = pl.DataFrame({"run_id": range(10), "group_key": ["b"] * 5 + ["g"] * 5,
                           "seed": [*range(5), *range(5)], "status": ["succeeded"] * 10,
                           "value": BASE + G1})
    info = pl.DataFrame({"group_key": ["b", "g"], "variant": ["baseline", "g1"],
                         "lr": [1e-2, 1e-2]})
    rows = read_rows(values, info, "baseline", spec.rule())
    shown = rows_frame(rows, spec).row(0, named=True)
    want = pairing(G1, BASE)
    assert want.corr is not None and want.multiplier is not None
    assert shown[PAIR_CORR] == f"{want.corr:+.2f}" == "+0.98"
    assert shown[SEED_MULTIPLIER] == f"{want.multiplier:.2g}×" == "25×"
    two = read_rows(values.filter(pl.col("seed") < 2), info, "baseline", spec.rule())
    assert rows_frame(two, spec).row(0, named=True)[PAIR_CORR] == "–"  # < 3 paired seeds
