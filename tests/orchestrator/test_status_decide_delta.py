"""`status` shows an adaptive sweep's change as the leaderboard does: one delta % (the mean
paired difference in % of |baseline mean|, compare.pct_of_base) beside the interval of the
tested statistic. It showed the mean of the per-seed relative differences instead, a second
number under the same name (-3.39 % beside the leaderboard's -4.07 % on a real 76-run sweep)."""

from __future__ import annotations

from pathlib import Path

import pytest

import results_db
from orchestrator.cli.read import decide_shown, stored_rule
from tests.support import decide_answers_db


def test_status_delta_is_the_leaderboards(tmp_path: Path) -> None:
    db = results_db.open(f"sqlite:///{tmp_path / 'a.db'}")
    decide_answers_db.build(db)
    sweep = decide_answers_db.SWEEP
    rule = stored_rule(db, sweep, "val/ppl")
    assert rule is not None and rule.relative
    shown = decide_shown(db.decide_rows(sweep, rule), relative=True)
    board = db.leaderboard(sweep, "val/ppl", decide=rule)
    pct = dict(zip(board["variant"], board["delta_pct"], strict=True))
    assert shown.height == 2
    for variant, delta, low, high in shown.select("variant", "delta", "low", "high").iter_rows():
        assert delta == pytest.approx(pct[variant], rel=1e-12)
        row = board.filter(board["variant"] == variant)
        assert (low, high) == pytest.approx((row["ci_low_pct"][0], row["ci_high_pct"][0]))
    # the fixture's per-seed ratios differ from the ratio of means: the old number was another
    rows = db.decide_rows(sweep, rule)
    assert any(abs(m * 100 - p) > 1e-6 for m, p in zip(rows["mean"], rows["delta_pct"],
                                                       strict=True))
    db.close()
