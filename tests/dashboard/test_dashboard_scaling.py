"""The three scaling surfaces -- db.scaling, `orchestrator scaling --format json` and
the dashboard's Scaling page -- show the same numbers on one DB; the page's charts use a log x
and the sweep-wide variant colours."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

import results_db
from dashboard import palette
from tests.dashboard.test_dashboard_app import chart_data, chart_specs, variant_colors
from tests.results_db.test_analysis_scaling import _fill

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash_scaling') / 'r.db'}"
    with results_db.open(url) as db:
        _fill(db, "scale", (1, 2, 4))
        _fill(db, "one-point", (2,), steps=(800,))
    return url


def _page(url: str, sweep: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["sweep"] = sweep
    at.query_params["page"] = "Scaling"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_api_cli_and_dashboard_agree(url: str, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrator.cli.main import main

    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("scale")
    assert main(["scaling", "scale", "--db", url, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"] == "\n".join(sc.sentences)
    api = sc.trends.to_dicts()
    assert len(doc["rows"]) == len(api)
    for cli_row, api_row in zip(doc["rows"], api, strict=True):
        for col in ("variant", "size", "x", "verdict", "n_seeds"):
            assert cli_row[col] == api_row[col]
        for col in ("slope", "slope_ci_low", "delta_pct_to", "ci_low_pct"):
            assert (cli_row[col] is None) == (api_row[col] is None)
            if api_row[col] is not None:
                assert cli_row[col] == pytest.approx(api_row[col])
    assert main(["scaling", "scale", "--db", url, "--format", "json", "--points"]) == 0
    cli_points = json.loads(capsys.readouterr().out)["rows"]
    assert [r["delta_pct"] for r in cli_points] == pytest.approx(sc.points["delta_pct"].to_list())

    at = _page(url, "scale", monkeypatch)
    text = " ".join(m.value for m in at.markdown)
    for sentence in sc.sentences[:2]:
        assert sentence.split(":")[0].split(" (")[0] in text
    assert "slope -1.20 pp per decade [-1.70, -0.70]" in text
    shown = at.dataframe[0].value  # the trends as text, '–' where there is no slope
    slopes = [t.split(" pp")[0] for t in shown["trend [95% CI]"] if t != "–"]
    assert slopes == [f"{v:+.2f}" for v in sc.trends["slope"].drop_nulls()]
    tokens_chart = chart_data(at)[0]
    got = sorted(v for f in tokens_chart if "d" in f.columns for v in f["d"])
    assert got == pytest.approx(sorted(sc.points["delta_pct"].to_list()))


def test_page_log_axes_and_variant_colours(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(url, "scale", monkeypatch)
    specs = chart_specs(at)
    assert len(specs) == 2  # vs tokens, vs FLOPs
    for spec in specs:
        assert '"type": "log"' in json.dumps(spec)
        want = palette.colors(["baseline", "sdpa_elementwise"], "baseline")
        assert variant_colors(spec).items() <= want.items() and variant_colors(spec)


def test_one_evaluation_point_says_it_cannot_judge(url: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(url, "one-point", monkeypatch)
    text = " ".join(m.value for m in at.markdown).replace("\\", "")  # md() escapes ':'
    assert "cannot judge: one evaluation point" in text


def test_cli_and_page_say_why_nothing_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs without val/ppl points (only a summary): one sentence naming the cause, no table;
    the page says the same sentence (db.scaling's reason), no chart."""
    from orchestrator.cli.main import main
    from tests.results_db.test_analysis_scaling import _config
    from tests.support.synth import add_finished_run

    url = f"sqlite:///{tmp_path / 'n.db'}"
    with results_db.open(url) as db:
        sid = db.ensure_sweep("summaries-only")
        for variant, gates in (("baseline", None), ("gated", [{"position": "G1"}])):
            add_finished_run(db, sid, variant, 0, _config(variant, 0, 2, gates),
                             summaries={"val/ppl": 3.0})
    assert main(["scaling", "summaries-only", "--db", url]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "no val/ppl evaluation point of a variant pairs with the baseline's (baseline)" in text
    assert "train.eval_every" in text and "┏" not in text
    with results_db.open(url, readonly=True) as db:
        sc = db.scaling("summaries-only")
    said = sc.said("summaries-only")
    assert said == [f"summaries-only: {sc.reason}"] and "train.eval_every" in said[0]
    at = _page(url, "summaries-only", monkeypatch)
    assert [i.value.replace("\\", "") for i in at.info] == said
    assert not chart_specs(at) and not at.dataframe


# --- the page on the 57-run gates-toy sweep (an LR ladder, one size) ------------------------
@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.support import report_db

    return report_db.build(f"sqlite:///{tmp_path_factory.mktemp('toy') / 'toy.db'}")


def test_toy_sweep_charts_first_lrs_apart_no_none(toy: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """60 bullet sentences stood before the first chart; a variant's four LRs were one line
    in one colour; the FLOPs axis used Vega's default format (100,000,000,000); the trends
    table showed "None" and no LR."""
    from tests.support.report_db import SWEEP

    at = _page(toy, SWEEP, monkeypatch)
    with results_db.open(toy, readonly=True) as db:
        sc = db.scaling(SWEEP)
    assert len(sc.sentences) == 60
    bullets = [m for m in at.markdown if m.value.startswith("- ")]
    assert len(bullets) == 1 and len(bullets[0].value.splitlines()) == 60
    (box,) = at.expander
    assert box.label == "The same in 60 sentences" and bullets[0] in box.markdown
    # one line per (variant, size, LR), told apart by dash; the axes in SI / scientific
    for spec, data in zip(chart_specs(at), chart_data(at), strict=True):
        line = next(lay for lay in spec["layer"] if lay["mark"]["type"] == "line")
        assert line["encoding"]["strokeDash"]["field"] == "lr"
        assert line["encoding"]["detail"]["field"] == "series"
        rows = max(data, key=len)
        for variant in ("baseline", "sdpa_elementwise", "sdpa_headwise"):
            series = set(rows.loc[rows["variant"] == variant, "series"])
            lrs = set(rows.loc[rows["variant"] == variant, "lr"])
            if variant != "baseline":
                assert lrs == {"3e-3", "1e-2", "3e-2", "1e-1"} and len(series) == 4
        fmt = line["encoding"]["x"]["axis"]["format"]
        assert fmt in ("~s", ".1~e")
    table = at.dataframe[0].value
    assert "lr" in table.columns and "None" not in table.to_string()
    assert not table.isna().any().any()
    elementwise = table[(table["variant"] == "sdpa_elementwise")
                        & table["read at"].str.startswith("end of training")]
    assert sorted(elementwise["lr"]) == ["1e-1", "1e-2", "3e-2", "3e-3"]


def test_a_mid_training_reading_says_its_step_never_at_end(toy: str,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The change at equal compute is read where the baseline's curve reaches the variant's
    FLOPs (step 200 of 400 here): the table and the sentence say so, and a trend's verdict is
    named as the trend's, never set beside the final change's interval as its own."""
    from tests.support.report_db import SWEEP

    with results_db.open(toy, readonly=True) as db:
        sc = db.scaling(SWEEP)
    iso = sc.trends.filter(pl.col("x") == "iso_flops").row(0, named=True)
    assert (iso["step"], iso["last_step"]) == (200, 400)
    assert "at step 200 of 400 (" in iso["sentence"]
    table = _page(toy, SWEEP, monkeypatch).dataframe[0].value
    at_iso = table[table["read at"].str.endswith(", equal FLOPs")]
    assert len(at_iso) == sc.trends.filter(pl.col("x") == "iso_flops").height
    assert "step 200 of 400, equal FLOPs" in set(at_iso["read at"])
    assert all(v.endswith("at equal compute") or v.startswith("one seed") or "cannot" in v
               for v in at_iso["verdict"])
    ends = table[table["read at"] == "end of training (step 400)"]
    assert len(ends) and all(v.startswith("trend ") for v in ends["verdict"])
