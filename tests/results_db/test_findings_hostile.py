"""The answers and the boards on sweeps no study should produce, but a DB can hold: every
baseline seed diverged, every value NaN, values near 1e308 (sums past the floats), a metric
no run logged, a variant name full of markup. Each gives its words, never a traceback, and no
verdict comes from a number that left the floats."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

import results_db
from results_db.analysis.findings import SAME_LR
from tests.support import synthdb

NAME = "x|<b>*y*"  # markup a surface must escape, not render
SPEC = {"name": "odd", "base": {"model": {"preset": "tiny"}, "train": {"steps": 40}},
        "variants": {"baseline": {}, "g": {"model.gates": [{"position": "G1"}]}},
        "axes": {"train.lr": [1e-3, 1e-2]}, "seeds": [0, 1, 2]}
Value = Callable[[str, float, int], float | None]  # (variant, lr, seed) -> value; None: diverged

CASES: dict[str, Value] = {
    "every baseline seed diverged": lambda v, lr, s: None if v == "baseline" else 7.0,
    "every value NaN": lambda v, lr, s: math.nan,
    "one seed inf": lambda v, lr, s: math.inf if s == 0 else 7.0 + s,
    "values near 1e308": lambda v, lr, s: 1e308 if v == "baseline" else 1e307,
    "a diverged seed at every LR": lambda v, lr, s: None if s == 0 else 7.0 + 0.1 * s,
}


def _db(tmp_path: Path, value: Value) -> results_db.ResultsDB:
    db = results_db.open(f"sqlite:///{tmp_path / 'h.db'}")
    for reg in synthdb.register(db, SPEC, labels={"g": NAME}):
        v = value(reg.run.variant, reg.run.spec.train.lr, reg.run.seed)
        synthdb.play(db, reg.id, "diverged" if v is None else "succeeded",
                     summaries=None if v is None else {"val/ppl": v})
    return db


@pytest.mark.parametrize("case", list(CASES))
def test_answers_and_boards_say_something_and_draw_no_verdict_from_inf(
        tmp_path: Path, case: str) -> None:
    db = _db(tmp_path, CASES[case])
    found = db.findings("odd")
    assert found.lines()[0].startswith("Sweep odd")
    for answer in found.answers:
        for f in answer.findings:
            if f.verdict in ("better", "worse"):
                e = f.estimate
                assert e is not None and math.isfinite(e.value), (case, f)
    board = db.leaderboard("odd")
    called = board.filter(board["verdict"].is_in(["better", "worse"]))
    assert called["delta_pct"].is_finite().all(), (case, called)
    db.best_vs_best("odd")  # its own reading of the ladders: no Null-typed column error


def test_near_1e308_the_change_is_read_where_it_is_a_number(tmp_path: Path) -> None:
    """Per seed the variant is 10x lower. The fixed board's means overflow (no number, no
    verdict); the ladders' own per-seed reading stays finite: -90 %."""
    db = _db(tmp_path, CASES["values near 1e308"])
    q1 = db.findings("odd").answer(SAME_LR)
    assert q1 is not None and q1.findings[0].verdict == "no data"
    bvb = db.best_vs_best("odd").row(0, named=True)
    assert bvb["delta_pct"] == pytest.approx(-90.0)


def test_a_metric_no_run_logged(tmp_path: Path) -> None:
    db = _db(tmp_path, lambda v, lr, s: 7.0 + s)
    assert db.findings("odd", "val/nope").answer(SAME_LR) is None
    board = db.leaderboard("odd", "val/nope")
    assert board["mean"].is_null().all() and not board["verdict"].is_in(
        ["better", "worse"]).any()
