"""`orchestrator leaderboard | table | effects | stability` print what results_db's analysis API
returns, unchanged: the JSON/CSV output equals the API's frames, the summary opens with
db.findings' answers, and the human formats carry the same verdicts (sample DB:
tests/sample_db.py).
"""

from __future__ import annotations

import json
import math
from io import StringIO
from pathlib import Path

import polars as pl
import pytest

import results_db
from orchestrator.cli.main import main
from tests import sample_db


@pytest.fixture()
def url(tmp_path: Path) -> str:
    return sample_db.copy_to(tmp_path)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12) or (math.isnan(a) and math.isnan(b))
    if isinstance(b, float) and a is None:
        return not math.isfinite(b)  # NaN/inf are null in JSON
    return a == b


def test_leaderboard_json_is_the_api_frame_and_summary(capsys: pytest.CaptureFixture[str],
                                                       url: str) -> None:
    code, out, err = run_cli(capsys, "leaderboard", "gates-toy", "--db", url, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    db = results_db.open(url, readonly=True)
    board = db.leaderboard("gates-toy", "val/ppl", min_effect=0.01)
    assert doc["summary"].startswith(db.findings("gates-toy", "val/ppl").text() + "\n")
    assert len(doc["rows"]) == board.height
    for got, want in zip(doc["rows"], board.to_dicts()):
        assert got.keys() == want.keys()
        assert all(_same(got[k], want[k]) for k in want), (got, want)
    verdicts = {r["variant"]: r["verdict"] for r in doc["rows"]}
    # the sample DB: sdpa_elementwise is 3 % better than the baseline; sdpa_headwise has 1 seed
    assert verdicts["sdpa_elementwise"] == "better" and verdicts["baseline"] == "baseline"
    assert verdicts["sdpa_headwise"] == "n = 1"


def test_leaderboard_table_and_markdown_show_the_api_verdicts(
        capsys: pytest.CaptureFixture[str], url: str) -> None:
    db = results_db.open(url, readonly=True)
    board = db.leaderboard("gates-toy", min_effect=0.05)  # 5 %: nothing clears it as "better"
    code, out, _ = run_cli(capsys, "leaderboard", "gates-toy", "--db", url,
                           "--min-effect", "0.05", "--format", "markdown")
    assert code == 0
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")][1:]  # minus the header
    assert len(lines) == board.height
    for line, row in zip(lines, board.iter_rows(named=True)):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[1] == row["variant"] and cells[8] == row["verdict"]
    assert "At the baseline" in out and "Every (variant, LR) row below" in out  # escaped
    code, out, _ = run_cli(capsys, "leaderboard", "gates-toy", "--db", url)
    assert code == 0 and "sdpa_elementwise" in out and "[-3.2" in out  # CI of the -3 % change


def test_leaderboard_correction_is_the_api_rule_and_says_so(
        capsys: pytest.CaptureFixture[str], url: str) -> None:
    """--correction/--family-error reach db.leaderboard unchanged; the summary names the rule
    (the default, too: each CI at 95 % with no correction over the rows)."""
    db = results_db.open(url, readonly=True)
    want = db.leaderboard("gates-toy", correction="bonferroni", family_error=0.1)
    code, out, err = run_cli(capsys, "leaderboard", "gates-toy", "--db", url, "--format",
                             "json", "--correction", "bonferroni", "--family-error", "0.1")
    assert code == 0, err
    doc = json.loads(out)
    family = want["family"][0]
    assert family and {r["correction"] for r in doc["rows"]} == {"bonferroni"}
    levels = [r["ci_level"] for r in doc["rows"] if r["ci_level"] is not None]
    assert len(levels) == family and levels == pytest.approx([1 - 0.1 / family] * family)
    assert [r["ci_low"] for r in doc["rows"]] == want["ci_low"].to_list()
    assert f"(Bonferroni over the {family} rows with a CI: each CI at " in doc["summary"]
    code, out, _ = run_cli(capsys, "leaderboard", "gates-toy", "--db", url)
    assert code == 0 and f"(95 % CI per row, no correction over the {family} rows" in out
    code, _, err = run_cli(capsys, "leaderboard", "gates-toy", "--db", url,
                           "--correction", "sidak")
    assert code != 0 and "correction: expected one of none, bonferroni, holm, got 'sidak'" \
        in err


def test_leaderboard_best_vs_best_is_the_api_frame(capsys: pytest.CaptureFixture[str],
                                                   url: str) -> None:
    """--best-vs-best prints db.best_vs_best (LRs picked on other seeds) and says how; a
    variant run at one LR gets words, no number; --lr declares the LR, and an LR the sweep
    never ran is one clear error."""
    db = results_db.open(url, readonly=True)
    code, out, err = run_cli(capsys, "leaderboard", "gates-toy", "--db", url, "--format",
                             "json", "--best-vs-best")
    assert code == 0, err
    doc = json.loads(out)
    want = db.best_vs_best("gates-toy")
    assert [r["verdict"] for r in doc["rows"]] == want["verdict"].to_list()
    rows = {r["variant"]: r for r in doc["rows"]}
    assert rows["kv_heads_x2"]["verdict"] == "no best LR (one LR)"
    assert rows["kv_heads_x2"]["delta_pct"] is None
    assert "each seed judged at the LR its other seeds pick" in doc["summary"]
    code, out, err = run_cli(capsys, "leaderboard", "gates-toy", "--db", url, "--format",
                             "json", "--lr", "0.01")
    assert code == 0, err
    assert {r["selection"] for r in json.loads(out)["rows"]} == {"declared LR 1e-2"}
    code, _, err = run_cli(capsys, "leaderboard", "gates-toy", "--db", url, "--lr", "0.05")
    assert code != 0 and "lr: the sweep ran no row at 5e-2; its learning rates: " in err


def test_table_csv_is_the_ablation_frame(capsys: pytest.CaptureFixture[str], url: str) -> None:
    code, out, err = run_cli(capsys, "table", "gates-toy", "--db", url, "--format", "csv",
                             "--metrics", "val/ppl,val/loss")
    assert code == 0, err
    got = pl.read_csv(StringIO(out))
    want = results_db.open(url, readonly=True).ablation_table(
        "gates-toy", metrics=["val/ppl", "val/loss"])
    assert got.columns == want.columns and got.height == want.height
    assert got["val/ppl:verdict"].to_list() == want["val/ppl:verdict"].to_list()
    assert got["val/ppl:mean"].to_list() == pytest.approx(want["val/ppl:mean"].to_list())
    assert "At the baseline's tuned LR 1e-2" in err  # the summary goes to stderr: CSV stays


def test_table_paper_and_latex_layouts(capsys: pytest.CaptureFixture[str], url: str) -> None:
    want = results_db.open(url, readonly=True).ablation_table("gates-toy", metrics=["val/ppl"])
    code, out, _ = run_cli(capsys, "table", "gates-toy", "--paper", "--db", url,
                           "--metrics", "val/ppl", "--format", "latex")
    assert code == 0 and "\\begin{tabular}" in out and "\\end{tabular}" in out
    rows = [ln for ln in out.splitlines() if ln.endswith("\\\\")][1:]
    assert len(rows) == want.height
    first = dict(zip(want["variant"].to_list(), want["val/ppl:text"].to_list()))
    from contract.textout import latex  # the one LaTeX escape ("±" is "$\\pm$")

    assert any(r.startswith("sdpa\\_elementwise &") and
               latex(f"{first['sdpa_elementwise']} (better)") in r for r in rows)


def test_effects_and_stability(capsys: pytest.CaptureFixture[str], url: str) -> None:
    db = results_db.open(url, readonly=True)
    code, out, _ = run_cli(capsys, "effects", "gates-toy", "--db", url, "--format", "json")
    assert code == 0
    assert len(json.loads(out)["rows"]) == db.effects("gates-toy").height
    st = db.stability("lr-stability")
    code, out, _ = run_cli(capsys, "stability", "lr-stability", "--db", url, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["summary"] == f"{st.sentence}\n{st.rule}"  # the outcome, then the rule
    assert "seeds agree" in st.sentence
    assert [r["max_stable_lr"] for r in doc["rows"]] == st.summary["max_stable_lr"].to_list()
    code, out, _ = run_cli(capsys, "stability", "lr-stability", "--curve", "--db", url,
                           "--format", "csv")
    assert pl.read_csv(StringIO(out)).height == st.curve.height
    code, out, _ = run_cli(capsys, "stability", "gpu-quick", "--db", url)
    assert code == 0 and "one learning rate" in out


@pytest.mark.parametrize("args,msg", [
    (("leaderboard", "nosuch"), "no sweep named 'nosuch'"),
    (("table", "gates-toy", "--format", "xml"), "--format: 'xml' is not one of"),
    (("effects", "gates-toy", "--min-effect", "-1"), "Invalid value for '--min-effect'"),
])
def test_errors_exit_2(capsys: pytest.CaptureFixture[str], url: str, args: tuple[str, ...],
                       msg: str) -> None:
    code, _, err = run_cli(capsys, *args, "--db", url)
    assert code == 2 and msg in err and "Traceback" not in err
