"""Adaptive sweeps on the dashboard: the Decide page of an adaptive (``decide:``) sweep, under
AppTest on a real SQLite DB whose seeds were allocated by the run room's own rounds until one
row decided and the other had not (tests/support/decide_sample.py). The page shows each row's
seeds so far, its interval narrowing seed by seed, decided/undecided, and the budget spent vs
left; it is offered only for sweeps with the block. results_db/read/decide_path.py's readings
are checked against db.decide_rows at the last look."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import results_db
from dashboard.mdtext import md
from results_db.read.decide_path import interval_path
from tests.support import dashboard_sample as sample
from tests.support import decide_sample
from tests.support.apppage import chart_datasets, open_page
from tests.support.decide_sample import SWEEP, TEXT


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('decide') / 'r.db'}"
    with results_db.open(url) as db:
        decide_sample.fill(db)
        sample.fill(db)  # a sweep without the block
    return url


def _decide_spec():  # noqa: ANN202 - the stored sweep's DecideSpec
    from orchestrator.sweep.spec import loads_spec

    decide = loads_spec(TEXT)[0].decide
    assert decide is not None
    return decide


def _rule():  # noqa: ANN202 - the stored sweep's DecideRule
    return _decide_spec().rule()


def test_decide_page_rows_narrowing_and_budget(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        rows = db.decide_rows(SWEEP, _rule())
        spent = db.decide_spent(SWEEP)
    verdicts = dict(zip(rows["variant"], rows["verdict"], strict=True))
    assert verdicts == {"clear": "better", "close": "undecided"}  # the scenario
    at = open_page("Decide", SWEEP)
    table = at.dataframe[0].value.set_index("variant")
    assert table.loc["clear", "state"] == "decided" and table.loc["clear", "verdict"] == "better"
    assert table.loc["close", "state"] == "undecided"
    for r in rows.iter_rows(named=True):
        assert table.loc[r["variant"], "seeds so far"] == str(len(r["seeds"]))
        assert table.loc[r["variant"], "interval (%)"] == \
            f"[{100 * r['low']:+.2f}, {100 * r['high']:+.2f}]"
        # the change by the one rule of every board (compare.pct_of_base), not the mean of
        # the per-seed ratios the relative test reads
        assert table.loc[r["variant"], "Δ (%)"] == f"{r['delta_pct']:+.2f}"
        assert table.loc[r["variant"], "note"] == (r["note"] or "–")
    (said,) = [m.value for m in at.markdown if "1 of 2 rows decided" in m.value]
    # the rule the rows were read by (their ``rule``, as `status` reads it), in its words
    from dashboard.views.decide import rule_words

    assert rule_words(rows, _decide_spec()) in said
    holm = rule_words(rows.with_columns(rule=pl.lit("holm")), _decide_spec())
    assert "Holm over the 2 rows" in holm and "Bonferroni over" not in holm, holm
    assert "intervals at Bonferroni's" in holm  # Holm has no interval of its own
    bars = [p.proto.text for p in at.get("progress")]
    assert f"runs: {spent.runs:g} of 40 spent, {40 - spent.runs:g} left" in bars
    # the narrowing: one interval per row and seed count, each no wider than the one before
    drawn = max(chart_datasets(at, 0), key=len)
    for _, grp in drawn.groupby("row"):
        widths = (grp.sort_values("seeds")["high"] - grp.sort_values("seeds")["low"]).tolist()
        assert len(widths) >= 2 and all(b <= a + 1e-9 for a, b in zip(widths, widths[1:]))


def test_budget_amounts_in_their_unit() -> None:
    from dashboard.views.decide import amount

    assert amount("wall time", 0.014166) == "51 s"
    assert amount("wall time", 0.2) == "12.0 min"
    assert amount("GPU time", 3.25) == "3.2 h"
    assert amount("runs", 40.0) == "40"


def test_decide_is_offered_for_adaptive_sweeps_only(url: str) -> None:
    at = open_page("Overview", sample.SWEEP)
    assert "Decide" not in at.sidebar.radio(key="page").options
    at = open_page("Overview", SWEEP)
    assert "Decide" in at.sidebar.radio(key="page").options


def test_the_path_ends_at_the_current_reading(url: str) -> None:
    with results_db.open(url, readonly=True) as db:
        rule = _rule()
        path = interval_path(db, SWEEP, rule)
        rows = db.decide_rows(SWEEP, rule)
    last = path.filter(pl.col("seeds") == path["seeds"].max())
    for r in rows.iter_rows(named=True):
        mine = last.filter(pl.col("variant") == r["variant"]).row(0, named=True)
        assert (mine["n"], mine["verdict"]) == (r["n"], r["verdict"])
        assert (mine["low"], mine["high"]) == pytest.approx((r["low"], r["high"]))
    first = path.filter(pl.col("seeds") == path["seeds"].min())
    assert set(first["n"]) <= {1, 2, 3}  # the first looks: a few paired seeds


def test_a_sweep_without_runs_has_no_path(tmp_path: Path) -> None:
    """A sweep without runs has an empty path (no look yet)."""
    url = f"sqlite:///{tmp_path / 'e.db'}"
    with results_db.open(url) as db:
        db.ensure_sweep(SWEEP, TEXT)
        assert interval_path(db, SWEEP, _rule()).is_empty()


def test_the_leaderboard_of_an_adaptive_sweep_says_its_own_rule(url: str) -> None:
    """The Leaderboard of a decide: sweep reads its rows as the CLI does: the decide sentence
    (anytime-valid, Holm) and each row's verdict from db.decide_rows, not a fixed-n t
    interval's (which does not hold once seeds were added after looking)."""
    with results_db.open(url, readonly=True) as db:
        said = db.decide_sentence(SWEEP, _rule())
        rows = db.decide_rows(SWEEP, _rule(), method="holm")
    at = open_page("Leaderboard", SWEEP)
    assert any(md(said) in m.value for m in at.markdown), [m.value for m in at.markdown]
    assert "anytime-valid" in said
    table = at.dataframe[0].value
    shown = dict(zip(table["variant"], table["verdict"], strict=True))
    assert shown["clear"] == "better"
    open_row = rows.filter(pl.col("variant") == "close").row(0, named=True)
    assert open_row["verdict"] == "undecided" and shown["close"].startswith("needs >= ")
