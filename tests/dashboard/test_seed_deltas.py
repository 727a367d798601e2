"""The leaderboard's seed dots (each run's Δ% vs its row's baseline mean) follow results_db's
one percentage rule, over |baseline mean|: with a negative baseline (a log-likelihood, a
benchmark margin) the page computed over the signed mean and drew every dot on the other side
of zero from its row's Δ% and CI."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import streamlit as st

import results_db
from dashboard import data
from dashboard.tables import row_labels
from dashboard.views.leaderboard import seed_deltas
from tests.support import synthdb

METRIC = "val/margin"  # a summary that is negative, lower is better as for a loss
# (variant, seed) -> value: the baseline near -2, the gate 0.5 higher (worse: +25 % of |-2|)
VALUES = {("baseline", 0): -2.0, ("baseline", 1): -2.1, ("baseline", 2): -1.9,
          ("gated", 0): -1.5, ("gated", 1): -1.7, ("gated", 2): -1.3}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("seed_deltas") / "results.db"
    db = results_db.open(f"sqlite:///{path}")
    spec = {"name": "neg", "base": {"model": {"preset": "tiny"}},
            "variants": {"baseline": {}, "gated": {"model.gates": [{"position": "G1"}]}},
            "seeds": [0, 1, 2]}
    for reg in synthdb.register(db, spec):
        synthdb.play(db, reg.id, summaries={METRIC: VALUES[(reg.run.variant, reg.run.seed)]})
    return f"sqlite:///{path}"


def test_seed_dots_follow_the_leaderboard_rule_on_a_negative_baseline(url: str) -> None:
    st.cache_data.clear()
    states = ("succeeded",)
    board = data.leaderboard(url, "neg", METRIC, True, states)
    board = board.with_columns(row_labels(board))
    row = board.filter(pl.col("variant") == "gated").row(0, named=True)
    base = row["mean"] - row["delta"]
    assert base == pytest.approx(-2.0) and row["delta_pct"] == pytest.approx(25.0)

    dots = seed_deltas(url, "neg", METRIC, board, states).sort("seed")
    assert dots["variant"].to_list() == ["gated"] * 3
    expected = [100.0 * (VALUES[("gated", s)] - base) / abs(base) for s in (0, 1, 2)]
    assert dots["delta_pct"].to_list() == pytest.approx(expected)  # +25, +15, +35
    # the dots sit around the row's Δ%, on its side of zero (over `base` they were -25 ...)
    assert all(d > 0 for d in dots["delta_pct"].to_list())
    assert sum(dots["delta_pct"].to_list()) / 3 == pytest.approx(row["delta_pct"])
