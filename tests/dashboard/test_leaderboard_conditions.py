"""The Leaderboard states each conclusion with the rule and the condition it holds under, and
never draws what the design cannot support (the multiplicity correction is a control; a row
run at one LR or with one seed is said in words), driven through the app (AppTest) on the
CLI's sample DB: gates-toy has an LR ladder for the baseline and the G1 gates, variants run at
3e-2 only, and sdpa_headwise with one finished seed per LR (tests/sample_db.py). Every number
is checked against results_db's API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import results_db
from dashboard.boardtable import DELTA_PCT
from dashboard.mdtext import md
from dashboard.tables import fmt_delta_ci, fmt_lr
from tests import sample_db
from tests.support.apppage import chart_datasets, open_page

SWEEP = "gates-toy"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample_db.build(tmp_path_factory.mktemp("lbcond"))


@pytest.fixture()
def page(url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", url)
    st.cache_data.clear()
    return open_page("Leaderboard", SWEEP)


def _table(at: AppTest, column: str):  # type: ignore[no-untyped-def]
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_the_correction_is_a_control_and_the_page_names_the_rule(page: AppTest,
                                                                  url: str) -> None:
    db = results_db.open(url, readonly=True)
    assert "[95 % CI per row, no correction over the" in page.markdown[1].value
    page.selectbox(key="lb_correction").set_value("bonferroni").run()
    assert not page.exception
    board = db.leaderboard(SWEEP, correction="bonferroni")
    family = board["family"][0]
    level = f"{100 * (1 - 0.05 / family):.4g} %"
    # the answers on top follow the control: Bonferroni over the rows at the tuned LR
    said = db.findings(SWEEP, correction="bonferroni")
    assert [m.value for m in page.markdown[:2]] == [f"**{md(said.lines()[0])}**",
                                                   md(said.lines()[1])]
    assert "Bonferroni over the" in said.lines()[1]
    spec = json.dumps(json.loads(page.get("vega_lite_chart")[0].proto.spec))
    assert f"vs baseline (%), Bonferroni {level} CI" in spec and "95 % CI" not in spec
    assert any(f"Bonferroni over the {family} rows" in c.value for c in page.caption)
    table = _table(page, DELTA_PCT).set_index("variant")
    row = board.filter(variant="sdpa_elementwise", lr=0.01).row(0, named=True)
    assert table.loc["sdpa_elementwise @ lr=1e-2", DELTA_PCT] == fmt_delta_ci(
        row["delta_pct"], row["ci_low_pct"], row["ci_high_pct"])


def test_the_holm_view_names_the_rule_of_the_intervals_it_draws(page: AppTest) -> None:
    """Holm has no interval of its own: the CIs drawn are Bonferroni's, and the axis says so
    (it said "Holm 99.67 % CI" beside a sentence calling them Bonferroni's)."""
    page.selectbox(key="lb_correction").set_value("holm").run()
    assert not page.exception
    spec = json.dumps(json.loads(page.get("vega_lite_chart")[0].proto.spec))
    assert "Holm 9" not in spec and "Bonferroni 9" in spec and "(verdicts by Holm)" in spec
    assert any("CIs at Bonferroni's" in c.value for c in page.caption)


def test_every_row_shows_its_lr_and_one_seed_rows_are_said_not_drawn(page: AppTest,
                                                                     url: str) -> None:
    table = _table(page, "mean ± std").set_index("variant")
    # its only LR, shown all the same: in the lr column and in its label
    assert table.loc["kv_heads_x2 @ lr=1e-2", "lr"] == "1e-2"
    single = [w.value for w in page.warning if w.value.startswith("n = 1: no error bar")]
    assert single and "sdpa_headwise @ lr=1e-2" in single[0]
    drawn = {r for f in chart_datasets(page, 0) if "row" in f.columns for r in f["row"]}
    assert "sdpa_headwise @ lr=1e-2" not in drawn and "kv_heads_x2 @ lr=1e-2" in drawn


def test_best_vs_best_says_one_lr_has_no_best_lr(page: AppTest, url: str) -> None:
    page.toggle(key="lb_best_lr").set_value(True).run()
    assert not page.exception
    rows = _table(page, "mean ± std")["variant"].tolist()
    assert "kv_heads_x2 @ lr=1e-2 (its only LR)" in rows and "sdpa_elementwise @ lr=1e-2" in rows
    best = _table(page, "Δ% best vs best [95% CI]").set_index("variant")
    kv = best.loc["kv_heads_x2"]
    assert (kv["its best LR"], kv["Δ% best vs best [95% CI]"], kv["verdict"]) == \
        ("–", "–", "no best LR (one LR)")
    assert kv["note"].startswith("kv_heads_x2 ran at one LR (1e-2) only")
    api = results_db.open(url, readonly=True).best_vs_best(SWEEP).filter(
        variant="sdpa_elementwise").row(0, named=True)
    g1 = best.loc["sdpa_elementwise"]
    assert g1["judged at"] == api["picks"] and g1["verdict"] == api["verdict"] == "better"
    assert g1["Δ% best vs best [95% CI]"] == fmt_delta_ci(api["delta_pct"], api["ci_low_pct"],
                                                         api["ci_high_pct"])


def test_main_effects_carry_their_lr_and_seeds(page: AppTest, url: str) -> None:
    eff = _table(page, "mean Δ% [95% CI]")
    api = results_db.open(url, readonly=True).effects(SWEEP)
    assert list(eff["lr"]) == [fmt_lr(v) for v in api["lr"].to_list()]
    assert list(eff["seeds"]) == [f"{n}{' (paired)' if p else ''}" for n, p in
                                  zip(api["n_seeds"].to_list(), api["paired"].to_list(),
                                      strict=True)]
    # a level listed at several LRs is told apart by its LR, never shown twice unlabelled
    keys = list(zip(eff["dimension"], eff["value"], eff["lr"], strict=True))
    assert len(keys) == len(set(keys))
    assert any(c.value.startswith("Per dimension value and LR") for c in page.caption)


def test_the_sample_is_what_these_tests_assume(tmp_path: Path) -> None:
    """gates-toy: kv_heads_x2 at one LR, the baseline on a ladder, main effects at >= 2 LRs."""
    with results_db.open(sample_db.copy_to(tmp_path), readonly=True) as db:
        board = db.leaderboard(SWEEP)
        assert board.filter(variant="kv_heads_x2")["lr"].to_list() == [0.01]
        assert board.filter(variant="baseline").height > 1
        assert db.effects(SWEEP)["lr"].n_unique() >= 2
