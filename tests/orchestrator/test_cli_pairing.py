"""`orchestrator leaderboard` shows each row's pairing correlation and seed multiplier, the
analysis API's values (results_db/analysis/pairing.py; sample DB: tests/sample_db.py, whose
variants are exact multiples of their baseline seed by seed, so they correlate perfectly)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.main import main
from tests import sample_db


def test_the_leaderboard_shows_what_pairing_bought(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    url = sample_db.copy_to(tmp_path)
    board = results_db.open(url, readonly=True).leaderboard("gates-toy", "val/ppl")
    row = board.filter((board["variant"] == "sdpa_elementwise") & (board["lr"] == 1e-2)) \
        .row(0, named=True)
    assert row["ci_method"] == "paired" and row["pair_corr"] == pytest.approx(1.0)
    ratio = 0.97 / 1.002  # sample_db._values: the variant / the baseline, at every seed
    assert row["seed_multiplier"] == pytest.approx((ratio ** 2 + 1) / (1 - ratio) ** 2,
                                                   rel=1e-6)
    assert main(["leaderboard", "gates-toy", "--db", url, "--format", "markdown"]) == 0
    header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| "))
    assert "pair_corr" in header and "seed_multiplier" in header
    assert main(["leaderboard", "gates-toy", "--db", url, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    got = next(r for r in rows if r["variant"] == "sdpa_elementwise" and r["lr"] == 1e-2)
    assert (got["pair_corr"], got["seed_multiplier"]) == pytest.approx(
        (row["pair_corr"], row["seed_multiplier"]))
