"""Scaling and the leaderboard on runs whose metric went NaN or inf (they diverged).

``orchestrator scaling`` said "the runs need val/ppl logged during training" for a sweep whose
runs had logged it at every evaluation -- as NaN or inf. It now says which side's points are
all NaN or inf (no change can be read from them), keeps "not logged" for runs that logged
nothing, and names a variant whose every point is non-finite beside the others' readings. The
leaderboard gives those rows no number ("no data"), never nan/inf.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.main import main
from tests.support import synthdb

SPEC = {"name": "odd", "base": {"model": {"preset": "tiny"},
                                "train": {"steps": 40, "eval_every": 10}},
        "variants": {"baseline": {}, "g": {"model.gates": [{"position": "G1"}]},
                     "h": {"model.gates": [{"position": "G1", "granularity": "headwise"}]}},
        "seeds": [0, 1, 2]}
Value = Callable[[str, int], float | None]  # (variant, seed) -> the value from step 20 on

CASES: dict[str, Value] = {
    "every value NaN": lambda v, s: math.nan,
    "every value inf": lambda v, s: math.inf,
    "the baseline NaN": lambda v, s: math.nan if v == "baseline" else 7.0 + 0.1 * s,
    "the variants inf": lambda v, s: math.inf if v != "baseline" else 7.0 + 0.1 * s,
}
NOT_LOGGED = "during training"  # the words of "no run logged it"


def _db(tmp_path: Path, value: Value, points: bool = True) -> str:
    url = f"sqlite:///{tmp_path / 'n.db'}"
    db = results_db.open(url)
    for reg in synthdb.register(db, SPEC):
        v = value(reg.run.variant, reg.run.seed)
        finite = v is not None and math.isfinite(v)
        pts = [(st, "val/ppl", 9.0 + 0.1 * reg.run.seed if st < 20 else v)
               for st in (10, 20, 30, 40)] if points and v is not None else []
        synthdb.play(db, reg.id, "succeeded" if finite else "diverged", points=pts,
                     summaries={"val/ppl": v} if v is not None else None)
    db.close()
    return url


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("case", list(CASES))
def test_scaling_says_the_points_are_not_finite_not_that_none_was_logged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    url = _db(tmp_path, CASES[case])
    code, out, err = _cli(capsys, "scaling", "odd", "--db", url)
    assert code == 0 and err == "", err
    assert NOT_LOGGED not in out and "NaN or inf" in out, out
    side = "baseline" if case != "the variants inf" else "g"
    assert side in out, out
    for fmt in ("csv", "json"):
        code, text, err = _cli(capsys, "scaling", "odd", "--db", url, "--format", fmt)
        assert code == 0 and "nan" not in text.lower().replace("nan or inf", "") and \
            "inf," not in text.lower(), (fmt, text)


def test_runs_that_logged_nothing_are_still_said_to_need_the_metric_logged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _db(tmp_path, lambda v, s: 7.0 + s, points=False)
    code, out, _ = _cli(capsys, "scaling", "odd", "--db", url)
    assert code == 0 and NOT_LOGGED in out and "NaN" not in out, out


def test_a_variant_whose_every_point_is_not_finite_is_named_beside_the_readings(
        tmp_path: Path) -> None:
    url = _db(tmp_path, lambda v, s: math.inf if v == "h" else 7.0 + 0.1 * s
              + (0.3 if v == "g" else 0.0))
    sc = results_db.open(url, readonly=True).scaling("odd")
    assert set(sc.trends["variant"].to_list()) == {"g"}
    [note] = [s for s in sc.sentences if s.startswith("h ")]
    assert "NaN or inf" in note and "diverged" in note, sc.sentences


@pytest.mark.parametrize("case", list(CASES))
def test_the_leaderboard_gives_non_finite_rows_no_number(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    url = _db(tmp_path, CASES[case])
    code, out, err = _cli(capsys, "leaderboard", "odd", "--db", url, "--format", "json")
    assert code == 0, err
    rows = json.loads(out)
    rows = rows["rows"] if isinstance(rows, dict) else rows
    for row in rows:
        for key in ("mean", "delta_pct", "ci_low_pct", "ci_high_pct"):
            v = row.get(key)
            assert v is None or math.isfinite(v), (case, row)
        if row["variant"] != "baseline" and row.get("mean") is None:
            assert row["verdict"] == "no data", (case, row)
