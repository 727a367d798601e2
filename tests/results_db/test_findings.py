"""The study's answers (results_db/analysis/findings.py, db.findings) on a sweep with known
numbers (tests/support/findings_db.py): a variant better only at an LR where the baseline is
degraded is never a headline "better", every finding names its condition and rule, and the
per-LR rows carry "vs an untuned baseline"."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import results_db
from results_db.analysis.findings import (
    HIGHER_MSL,
    NOT_RUN_THERE,
    NOT_TUNED,
    SAME_LR,
    SCALE,
    STABILITY,
    TUNED,
    Estimate,
)
from results_db.analysis.stats import delta_ci
from results_db.analysis.untuned import CONDITION
from tests.support import findings_db
from tests.support.findings_db import PPL, SWEEP


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> results_db.ResultsDB:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('findings')) / 'f.db'}"
    d = results_db.open(url)
    findings_db.build(d)
    return d


def _by(answer, subject: str):  # noqa: ANN001, ANN202 - a test lookup
    return next(f for f in answer.findings if f.subject == subject)


def test_questions_in_order_with_the_baselines_tuned_lr(db: results_db.ResultsDB) -> None:
    f = db.findings(SWEEP)
    assert [a.question for a in f.answers] == [SAME_LR, TUNED, STABILITY]  # no size axis
    assert f.baseline == "baseline" and f.tuned_lr == pytest.approx(1e-2)


def test_same_lr_reads_every_variant_at_the_tuned_lr(db: results_db.ResultsDB) -> None:
    a = db.findings(SWEEP).answer(SAME_LR)
    assert a is not None
    gated = _by(a, "gated")
    ci = delta_ci(list(PPL["gated", 1e-2]), list(PPL["baseline", 1e-2]), [0, 1, 2], [0, 1, 2])
    assert ci.delta is not None and ci.low is not None and ci.high is not None
    assert gated.verdict == "better"
    assert gated.estimate == Estimate(100 * ci.delta / 7.2, "%", 100 * ci.low / 7.2,
                                      100 * ci.high / 7.2, 0.95)
    assert gated.estimate.value == pytest.approx(-5.0926, abs=1e-4)
    assert gated.condition.lr == "1e-2" and gated.condition.metric == "val/ppl"
    assert gated.condition.seeds == "3 seeds, paired"
    assert gated.condition.step == "end of training (step 400)"
    assert gated.rule == "95 % CI per row, no correction over the 2 rows with a CI"
    # the one-LR variant at the tuned LR answers; the one run only at 3e-2 does not
    board = db.leaderboard(SWEEP)
    kv_row = board.filter((pl.col("variant") == "kv_x2")).row(0, named=True)
    assert _by(a, "kv_x2").verdict == kv_row["verdict"] == "needs >= 5 seeds"
    silu = _by(a, "silu_only")
    assert silu.verdict == NOT_RUN_THERE and silu.estimate is None
    assert silu.note == "ran at 3e-2 only"


def test_a_row_better_only_where_the_baseline_is_untuned_is_no_headline(
        db: results_db.ResultsDB) -> None:
    board = db.leaderboard(SWEEP)
    row = board.filter(pl.col("variant") == "silu_only").row(0, named=True)
    # the leaderboard's per-LR detail: "better" by 20.6 %, against a baseline 41.7 % worse than
    # at its best LR -- labelled so
    assert row["verdict"] == "better" and row["delta_pct"] == pytest.approx(-20.588, abs=0.001)
    assert row[CONDITION] == "vs an untuned baseline (41.7 % worse than at its best LR 1e-2)"
    base3 = board.filter((pl.col("variant") == "baseline") & (pl.col("lr") == 3e-2))
    assert base3[CONDITION][0] == "untuned baseline (41.7 % worse than at its best LR 1e-2)"
    # 3e-3: 5.7 % worse, paired CI [0.39, 0.43] excludes 0 -> untuned too; 1e-2: tuned
    at = {(r["variant"], r["lr"]): r[CONDITION] for r in board.iter_rows(named=True)}
    assert at["gated", 3e-3] == "vs an untuned baseline (5.7 % worse than at its best LR 1e-2)"
    assert at["gated", 1e-2] is None and at["kv_x2", 1e-2] is None
    f = db.findings(SWEEP)
    text = f.text()
    better = [x for a in f.answers for x in a.findings if x.verdict == "better"]
    assert [(x.question, x.subject) for x in better] == [(SAME_LR, "gated"), (TUNED, "gated")]
    assert "silu_only -" not in text and "1 of 2 variants better (gated" in text
    tuned = f.answer(TUNED)
    assert tuned is not None and _by(tuned, "silu_only").verdict == NOT_TUNED
    assert _by(tuned, "kv_x2").verdict == NOT_TUNED


def test_tuned_vs_tuned_names_the_held_out_picks(db: results_db.ResultsDB) -> None:
    tuned = db.findings(SWEEP).answer(TUNED)
    assert tuned is not None
    g = _by(tuned, "gated")
    bvb = db.best_vs_best(SWEEP).filter(pl.col("variant") == "gated").row(0, named=True)
    assert g.verdict == bvb["verdict"] == "better"
    assert g.estimate is not None and g.estimate.value == pytest.approx(bvb["delta_pct"])
    assert g.condition.lr == ("1e-2 vs the baseline's 1e-2 (held-out picks: s0 1e-2, s1 1e-2, "
                              "s2 1e-2 / s0 1e-2, s1 1e-2, s2 1e-2)")
    assert "leave-one-seed-out" in g.rule


def test_stability_answer_is_table_2s_frame(db: results_db.ResultsDB) -> None:
    st = db.findings(SWEEP).answer(STABILITY)
    assert st is not None
    g, b = _by(st, "gated"), _by(st, "baseline")
    assert g.estimate == Estimate(3e-2, "LR") and g.verdict == HIGHER_MSL
    assert b.estimate == Estimate(1e-2, "LR") and b.verdict == "baseline"
    assert g.note == "3 of 3 seeds agree"
    assert "gated 3e-2 (3 of 3 seeds agree)" in st.summary


def test_holm_shows_the_p_value_beside_its_threshold(db: results_db.ResultsDB) -> None:
    a = db.findings(SWEEP, correction="holm").answer(SAME_LR)
    assert a is not None and a.rule.startswith("Holm over the 2 rows with a CI")
    e = _by(a, "gated").estimate
    assert e is not None and e.p_value is not None and e.threshold == pytest.approx(0.025)
    assert f"(p = {e.p_value:.3g} <= Holm's 0.025)" in e.text()


def test_a_sweep_without_an_lr_axis_says_its_lr_is_not_tuned(tmp_path: Path) -> None:
    from tests.support import dashboard_sample

    url = dashboard_sample.write_db(tmp_path / "demo.db")
    with results_db.open(url, readonly=True) as d:
        f = d.findings(dashboard_sample.SWEEP)
    assert [a.question for a in f.answers] == [SAME_LR]
    assert f.tuned_lr is None
    assert "the baseline's only LR 3e-3 (not tuned: the baseline ran at one LR)" in f.text()


def test_a_size_axis_asks_the_scale_question(db: results_db.ResultsDB) -> None:
    findings_db.build_sizes(db)
    f = db.findings(findings_db.SIZES)
    assert [a.question for a in f.answers] == [SAME_LR, SCALE]  # one LR: nothing tuned
    same = f.answer(SAME_LR)
    assert same is not None
    assert [x.subject for x in same.findings] == ["gated (n_layer=1)", "gated (n_layer=2)"]
    assert [x.estimate.value for x in same.findings if x.estimate] == pytest.approx(
        [-2.0, -6.0], abs=1e-6)
    scale = f.answer(SCALE)
    assert scale is not None
    (g,) = scale.findings
    trend = db.scaling(findings_db.SIZES).trends.filter(pl.col("x") == "params").row(
        0, named=True)
    assert g.estimate is not None and g.estimate.value == pytest.approx(trend["slope"])
    assert g.estimate.unit == "pp per decade of parameters"
    assert g.verdict == trend["verdict"] == "shifts in the variant's favour"
    assert g.condition.lr == "1e-2" and "n_layer" in g.condition.step


def test_no_runs_and_no_baseline_are_said(tmp_path: Path) -> None:
    with results_db.open(f"sqlite:///{tmp_path / 'e.db'}") as d:
        f = d.findings("nope")
    assert f.answers == () and f.lines() == ["Sweep nope:",
                                             "No finished runs with a val/ppl value yet."]


@pytest.mark.parametrize("base_1e2, reads_at", [
    ((7.25, 6.9, 7.5), 1e-2),  # within noise of the best mean (3e-3): where kv_x2 ran too
    ((8.0, 8.1, 8.2), 3e-3),  # worse beyond noise: untuned, question 1 stays at the best
])
def test_question_one_reads_where_the_baseline_is_tuned_and_most_variants_ran(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base_1e2: tuple[float, ...],
        reads_at: float) -> None:
    """The baseline's best mean is at 3e-3; at 1e-2 it is within noise of it, and kv_x2 ran
    only there. Question 1 reads all variants at 1e-2 and says why; when the baseline is
    worse beyond noise at 1e-2, it reads at 3e-3 and kv_x2 answers nothing."""
    ppl = {**PPL, ("baseline", 3e-3): (7.2, 7.1, 7.3), ("baseline", 1e-2): base_1e2}
    monkeypatch.setattr(findings_db, "PPL", ppl)
    d = results_db.open(f"sqlite:///{tmp_path / 'f.db'}")
    findings_db.build(d)
    q1 = d.findings(SWEEP).answer(SAME_LR)
    assert q1 is not None
    assert q1.condition.startswith(f"val/ppl, LR {'1e-2' if reads_at == 1e-2 else '3e-3'}")
    kv = _by(q1, "kv_x2")
    if reads_at == 1e-2:
        assert kv.verdict != NOT_RUN_THERE and "within noise of its best mean at 3e-3" in \
            q1.summary
    else:
        assert kv.verdict == NOT_RUN_THERE and "within noise" not in q1.summary
