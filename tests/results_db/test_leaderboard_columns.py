"""The leaderboard's column schema (results_db/analysis/columns.py) is the one list of its
statistics: db.leaderboard's columns and dtypes follow it, and the CLI's human table picks its
columns from it (the same ten as before the schema)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import results_db
from results_db.analysis.columns import HEAD, STAT_COLUMNS, STATS, TAIL, shown_columns
from tests.support import synthdb


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> results_db.ResultsDB:
    path: Path = tmp_path_factory.mktemp("columns") / "results.db"
    d = results_db.open(f"sqlite:///{path}")
    spec = {"name": "s", "base": {"model": {"preset": "tiny"}},
            "variants": {"baseline": {}, "gated": {"model.gates": [{"position": "G2"}]}},
            "axes": {"train.lr": [1e-3, 3e-3]}, "seeds": [0, 1]}
    for i, reg in enumerate(synthdb.register(d, spec)):
        synthdb.play(d, reg.id, summaries={"val/ppl": 10.0 + i % 3})
    return d


def test_leaderboard_follows_the_schema(db: results_db.ResultsDB) -> None:
    board = db.leaderboard("s")
    assert board.columns == [*HEAD, "gate_position", *STAT_COLUMNS, *TAIL]
    for stat in STATS:
        assert board.schema[stat.name] == getattr(pl, stat.dtype), stat.name
    none = db.leaderboard("s", states=("cancelled",))  # no value in any group: all null
    assert none["n"].to_list() == [0] * 4 and none["mean"].is_null().all()
    assert all(none.schema[s.name] == getattr(pl, s.dtype) for s in STATS)


def test_cli_shows_the_schema_columns() -> None:
    from orchestrator.cli.results import BOARD_COLUMNS

    assert BOARD_COLUMNS == shown_columns() == [
        "rank", "variant", "lr", "n", "mean", "std", "delta_pct", "ci", "verdict",
        "seeds_needed", "pair_corr", "seed_multiplier", "condition"]
