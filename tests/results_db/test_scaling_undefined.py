"""Hostile input: a scaling comparison that has no finite answer at some step says so, instead of
crashing (a baseline mean of 0: TypeError formatting None) or printing verdicts computed from
NaN/inf (a baseline of 1e308 against a variant of 1e-308: "+nan % ... moves toward ...")."""

from __future__ import annotations

import math

import pytest

import results_db
from orchestrator.cli.main import main
from results_db.analysis.scaling import TREND_WORDS
from tests.support.synth import add_finished_run, gate_config

STEPS = (100, 200, 400, 800)
G1 = [{"position": "G1"}]


def _fill(db: results_db.ResultsDB, sweep: str, base: dict[int, float],
          variant: dict[int, float]) -> None:
    """Three seeds of a baseline and a G1 variant whose val/ppl is ``base``/``variant`` at
    each step (seed s adds s * 1e-3 to the variant, so the seeds differ)."""
    sid = db.ensure_sweep(sweep)
    for name, gates, values in (("baseline", None, base), ("sdpa_elementwise", G1, variant)):
        for seed in range(3):
            cfg = {**gate_config(gates, seed=seed), "name": f"{name}-s{seed}", "sweep": sweep}
            shift = seed * 1e-3 if gates else 0.0
            points = [(s, "val/ppl", values[s] + shift) for s in STEPS]
            add_finished_run(db, sid, name, seed, cfg, points=points,
                             summaries={"val/ppl": points[-1][2]})


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('undefined') / 'r.db'}"
    with results_db.open(url) as db:
        # the baseline's metric is 0 at step 100 (a metric that can be 0: a count, a rate)
        _fill(db, "zero", {100: 0.0, 200: 10.0, 400: 10.0, 800: 10.0},
              {s: 9.0 for s in STEPS})
        # every delta overflows: 1e308 against 1e-308
        _fill(db, "huge", {s: 1e308 for s in STEPS}, {s: 1e-308 for s in STEPS})
    return url


def _finite_or_none(v: object) -> bool:
    return v is None or not isinstance(v, float) or math.isfinite(v)


def test_a_zero_baseline_step_is_undefined_not_a_crash(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("zero")
    pts = {r["step"]: r for r in sc.points.iter_rows(named=True)}
    assert pts[100]["delta_pct"] is None and pts[100]["ci_low_pct"] is None
    assert pts[200]["delta_pct"] == pytest.approx(-9.99, abs=0.01)
    tok = next(r for r in sc.trends.iter_rows(named=True) if r["x"] == "tokens")
    assert all(_finite_or_none(v) for v in tok.values())
    assert "undefined" in tok["sentence"] and "100" not in tok["verdict"]
    # the slope rests on the three steps where the comparison is defined
    assert tok["delta_pct_to"] == pytest.approx(-9.99, abs=0.01)
    assert tok["verdict"] in (*TREND_WORDS.values(), "undefined at some steps")


def test_overflowing_values_give_no_verdict_from_nan(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("huge")
    for row in (*sc.points.iter_rows(named=True), *sc.trends.iter_rows(named=True)):
        assert all(_finite_or_none(v) for v in row.values()), row
        for word in ("nan", "inf"):
            assert word not in str(row.get("sentence") or "").lower(), row
    tok = next(r for r in sc.trends.iter_rows(named=True) if r["x"] == "tokens")
    assert tok["verdict"].startswith("undefined"), tok
    assert not any(w in tok["sentence"] for w in TREND_WORDS.values())


def test_the_scaling_command_prints_the_undefined_comparison(url: str,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    for sweep in ("zero", "huge"):
        code = main(["scaling", sweep, "--metric", "val/ppl", "--db", url])
        cap = capsys.readouterr()
        assert code == 0, cap.err
        assert "undefined" in cap.out and "nan" not in cap.out.lower()

