"""The leaderboard's multiplicity correction (results_db/analysis/multiplicity.py, compare.py)
on a real SQLite results DB: each row's CI, p-value and verdict per rule against scipy's paired
t-test, the family being the rows that have a CI, and the rule said in the summary sentence.

Four paired rows (seeds 0-3) whose paired t-test p-values are set by construction: A ~1e-4,
B 0.015 (between Bonferroni's 0.05/4 and Holm's second step 0.05/3), C 0.03 (beyond Holm's
third step 0.05/2), D 0.5; E has one seed (no CI, not in the family)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import results_db
from results_db.analysis.multiplicity import holm, row_level, rule_text
from tests.support.synth import add_finished_run, gate_config

SEEDS = (0, 1, 2, 3)
BASE = {s: 20.0 + 0.4 * s for s in SEEDS}
Z = np.array([-3.0, -1.0, 1.0, 3.0]) / math.sqrt(20 / 3)  # mean 0, sd 1
P = {"a": 1e-4, "b": 0.015, "c": 0.03, "d": 0.5}
SD = 0.2  # sd of the per-seed differences


def _diffs(p: float) -> np.ndarray:
    """Per-seed differences (variant - baseline) whose paired t-test gives p (lower values:
    the variant is better on val/ppl)."""
    t = stats.t.ppf(1 - p / 2, len(SEEDS) - 1)
    return -t * SD / math.sqrt(len(SEEDS)) + SD * Z


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('mult') / 'r.db'}"
    with results_db.open(url) as db:
        sid = db.ensure_sweep("mult")
        for s in SEEDS:
            add_finished_run(db, sid, "baseline", s, gate_config(seed=s),
                             summaries={"val/ppl": BASE[s]})
        for i, (variant, p) in enumerate(P.items()):
            for s, d in zip(SEEDS, _diffs(p), strict=True):
                add_finished_run(db, sid, variant, s,
                                 gate_config([{"position": f"G{i + 1}"}], seed=s),
                                 summaries={"val/ppl": BASE[s] + float(d)})
        add_finished_run(db, sid, "e", 0, gate_config([{"position": "G5"}], seed=0),
                         summaries={"val/ppl": 19.0})
    return url


def _board(url: str, **kw: object) -> dict[str, dict]:
    with results_db.open(url, readonly=True) as db:
        return {r["variant"]: r for r in db.leaderboard("mult", **kw).iter_rows(named=True)}


def _scipy(variant: str, level: float) -> tuple[float, float, float]:
    x = [BASE[s] + float(d) for s, d in zip(SEEDS, _diffs(P[variant]), strict=True)]
    res = stats.ttest_rel(x, [BASE[s] for s in SEEDS])
    ci = res.confidence_interval(confidence_level=level)
    return float(res.pvalue), float(ci.low), float(ci.high)


def test_default_is_each_row_at_95_percent(url: str) -> None:
    rows = _board(url)
    for v in P:
        p, low, high = _scipy(v, 0.95)
        r = rows[v]
        assert r["p_value"] == pytest.approx(P[v], rel=1e-6) == pytest.approx(p, rel=1e-9)
        assert (r["ci_low"], r["ci_high"]) == (pytest.approx(low, abs=1e-9),
                                              pytest.approx(high, abs=1e-9))
        assert r["ci_level"] == 0.95 and (r["correction"], r["family"]) == ("none", 4)
    assert [rows[v]["verdict"] for v in "abc"] == ["better"] * 3  # each p < 0.05
    assert rows["e"]["verdict"] == "n = 1" and rows["e"]["ci_level"] is None
    assert rows["e"]["p_value"] is None and rows["baseline"]["p_value"] is None


def test_bonferroni_reads_each_ci_at_one_minus_alpha_over_the_family(url: str) -> None:
    rows = _board(url, correction="bonferroni")
    level = 1 - 0.05 / 4
    for v in P:
        _, low, high = _scipy(v, level)
        assert rows[v]["ci_level"] == pytest.approx(level)
        assert (rows[v]["ci_low"], rows[v]["ci_high"]) == (pytest.approx(low, abs=1e-9),
                                                          pytest.approx(high, abs=1e-9))
    assert rows["a"]["verdict"] == "better"
    assert rows["b"]["ci_high"] > 0 and rows["b"]["verdict"] != "better"  # p 0.015 > 0.0125
    assert rows["c"]["verdict"] != "better"


def test_holm_steps_down_and_calls_what_bonferroni_misses(url: str) -> None:
    rows = _board(url, correction="holm")
    assert [rows[v]["verdict"] == "better" for v in "abcd"] == [True, True, False, False]
    # the intervals shown are Bonferroni's (Holm has none of its own)
    bonf = _board(url, correction="bonferroni")
    assert rows["b"]["ci_low"] == pytest.approx(bonf["b"]["ci_low"])
    assert rows["b"]["ci_level"] == pytest.approx(1 - 0.05 / 4)
    # a larger family error lets Holm reach C too: 0.03 <= 0.1 / 2
    loose = _board(url, correction="holm", family_error=0.1)
    assert loose["c"]["verdict"] == "better" and loose["d"]["verdict"] != "better"


def test_the_summary_names_the_rule(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        plain = db.findings("mult").lines()[1]
        held = db.findings("mult", correction="holm")
    assert ": 3 of 5 variants better (" in plain
    assert plain.endswith("[95 % CI per row, no correction over the 4 rows with a CI].")
    text = held.lines()[1]
    assert ": 2 of 5 variants better (" in text
    assert text.endswith("[Holm over the 4 rows with a CI, family-wise error <= 5 %; CIs at "
                         "Bonferroni's 98.75 %].")
    # beside a Holm verdict: its p-value and step-down threshold, not only Bonferroni's CI
    same = held.answers[0]
    b = next(f for f in same.findings if f.subject == "b")
    assert b.verdict == "better" and b.estimate is not None
    assert b.estimate.threshold == pytest.approx(0.05 / 3) and b.estimate.p_value is not None
    assert b.estimate.p_value <= b.estimate.threshold


def test_rule_helpers() -> None:
    assert row_level("none", 0.05, 15) == pytest.approx(0.95)
    assert row_level("bonferroni", 0.05, 15) == pytest.approx(1 - 0.05 / 15)
    assert holm(np.array([0.01, np.nan, 0.04, 0.02]), 0.05).tolist() == [True, False, True, True]
    assert holm(np.array([0.02, 0.03]), 0.05).tolist() == [True, True]
    assert holm(np.array([0.03, 0.026]), 0.05).tolist() == [False, False]
    assert rule_text("bonferroni", 0.05, 1) == ("Bonferroni over the 1 row with a CI: each CI "
                                                "at 95 %, family-wise error <= 5 %")
    with pytest.raises(ValueError, match="correction: expected one of none, bonferroni, holm"):
        row_level("sidak", 0.05, 3)
    with pytest.raises(ValueError, match=r"family_error: an error rate in \(0, 0.5\]"):
        row_level("holm", 0.0, 3)
