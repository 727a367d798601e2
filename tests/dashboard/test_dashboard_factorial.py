"""The 2x2 on the Ablation tables page (AppTest) and in the sweep report, on the synthetic
sparse x gated sweep (tests/support/factorial_db.py): the cells as a grid (the leaderboard's Δ,
CI and verdict), the main effects and the interaction beside them, the sentence above; nothing
for a sweep without the 2x2. Both surfaces show dashboard/factorialtable.py's frames."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import results_db
from dashboard.factorialtable import factorial_text
from dashboard.mdtext import md
from dashboard.report import content, html, markdown
from tests.support import factorial_db as f2
from tests.support.apppage import open_page

NO_CORNER = "no-corner"


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('f2dash') / 'results.db'}"
    with results_db.open(url) as db:
        f2.build(db)
        f2.build(db, ("baseline", "dense_g1", "nsa_equal", "nsa_gated"), sweep=NO_CORNER)
    return url


def _page(url: str, monkeypatch: pytest.MonkeyPatch, sweep: str) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", url)
    st.cache_data.clear()
    return open_page("Ablation tables", sweep)


def test_the_text_frames(db_url: str) -> None:
    fac = results_db.open(db_url, readonly=True).factorial(f2.SWEEP)
    text = factorial_text(fac)
    assert text is not None and text.title == "2x2: sparse x gated"
    grid = text.grid.to_dicts()
    assert [r[""] for r in grid] == ["sparse off", "sparse on"]
    assert grid[0]["gated off"] == "baseline (baseline)"
    assert grid[1]["gated off"] == "nsa_equal: +2.1% [+1.9, +2.3] worse"
    assert grid[0]["gated on"] == "dense_g1: -2.2% [-4.3, -0.1] better"
    assert grid[1]["gated on"] == "nsa_equal_g1: -4.1% [-6.2, -2.0] better"
    assert text.effects.to_dicts() == [
        {"Contrast": "sparse (main)", "Δ% [CI]": "+0.1% [-0.1, +0.3]", "Verdict": "within noise",
         "Seeds": "4 (-1)"},
        {"Contrast": "gated (main)", "Δ% [CI]": "-4.0% [-5.2, -2.8]", "Verdict": "better",
         "Seeds": "4 (-1)"},
        {"Contrast": "sparse x gated", "Δ% [CI]": "-4.0% [-4.4, -3.6]",
         "Verdict": "better", "Seeds": "4 (-1)"}]
    assert "Bonferroni over the 3 contrasts" in text.effects_caption
    no = results_db.open(db_url, readonly=True).factorial(NO_CORNER)
    assert factorial_text(no) is None


def test_the_ablation_page_shows_the_2x2_beside_its_contrasts(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(db_url, monkeypatch, f2.SWEEP)
    text = factorial_text(results_db.open(db_url, readonly=True).factorial(f2.SWEEP))
    assert text is not None
    assert [s.value for s in at.subheader] == [md(text.title)]
    assert md(text.sentence) in [m.value for m in at.markdown]
    assert len(at.dataframe) == 3  # the quality table, the cells, the contrasts
    assert at.dataframe[1].value.to_dict("records") == text.grid.to_dicts()
    assert at.dataframe[2].value.to_dict("records") == text.effects.to_dicts()
    at.radio(key="ab_kind").set_value("probes").run()  # the 2x2 is the quality table's
    assert not at.exception and not at.subheader and len(at.dataframe) == 1


def test_no_2x2_no_section(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(db_url, monkeypatch, NO_CORNER)
    assert not at.subheader and len(at.dataframe) == 1


def test_the_report_shows_the_same_frames(db_url: str) -> None:
    db = results_db.open(db_url, readonly=True)
    text = factorial_text(db.factorial(f2.SWEEP))
    assert text is not None
    section = content.ablation_tables(db, f2.SWEEP)
    tables = {b.id: b for b in section.blocks}
    assert tables["factorial-cells"].frame.equals(text.grid)
    assert tables["factorial-effects"].frame.equals(text.effects)
    assert f"2x2: sparse x gated. {text.sentence}" in section.sentences
    page = html.section_html(section)
    assert '<table class="data" id="factorial-cells">' in page
    assert "nsa_equal: +2.1% [+1.9, +2.3] worse" in page
    assert "| sparse x gated |" in markdown.table_md(tables["factorial-effects"])
    plain = content.ablation_tables(db, NO_CORNER)
    assert not any(b.id.startswith("factorial") for b in plain.blocks)
    assert len(plain.sentences) == 1
