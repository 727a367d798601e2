"""db.leaderboard's ``seeds_observed``: the seeds per variant that would confirm the effect
actually observed (``seeds_needed`` is for min_effect, 1 % by default), by the same rule
(stats.seeds_needed with the observed |Δ| / base mean as the effect). Why: "-29.9 % ...
needs >= 417 seeds" read as "this effect needs 417 seeds"."""

from __future__ import annotations

import math
import statistics

import pytest

import results_db
from results_db.analysis.stats import seeds_needed
from tests.support.synth import add_finished_run, gate_config

BASE = [20.0, 21.0, 22.0]
G1 = [{"position": "G1"}]


@pytest.fixture
def db(tmp_path):
    with results_db.open(f"sqlite:///{tmp_path / 'r.db'}") as d:
        sid = d.ensure_sweep("s")
        rows = {"baseline": ([], BASE), "big": (G1, [12.0, 14.5, 13.0]),
                "welch": ([{"position": "G2"}], [19.0, 19.4]),
                "same": ([{"position": "G3"}], BASE)}
        for variant, (gates, ppls) in rows.items():
            for seed, ppl in enumerate(ppls):
                add_finished_run(d, sid, variant, seed,
                                 gate_config(gates, seed=seed), summaries={"val/ppl": ppl})
        yield d


def test_seeds_to_confirm_the_observed_effect(db) -> None:
    rows = {r["variant"]: r for r in db.leaderboard("s").iter_rows(named=True)}
    big = rows["big"]  # paired: diffs (-8, -6.5, -9)
    diffs = [a - b for a, b in zip([12.0, 14.5, 13.0], BASE, strict=True)]
    rel = statistics.stdev(diffs) / 21.0
    effect = abs(statistics.fmean(diffs)) / 21.0
    assert big["seeds_observed"] == seeds_needed(rel, effect, paired=True)
    assert big["seeds_observed"] < big["seeds_needed"]  # a 37 % effect needs fewer than 1 %
    welch = rows["welch"]
    spread = math.sqrt((statistics.variance([19.0, 19.4]) + 1.0) / 2) / 21.0
    assert welch["seeds_observed"] == seeds_needed(spread, abs(19.2 - 21.0) / 21.0)
    assert welch["seeds_needed"] == seeds_needed(spread)  # unchanged: for a 1 % effect
    # no effect observed (identical values), and the baseline: nothing to confirm
    assert rows["same"]["seeds_observed"] is None and rows["baseline"]["seeds_observed"] is None
