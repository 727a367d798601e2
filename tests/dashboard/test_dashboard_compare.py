"""The dashboard's comparison features, driven through the app (AppTest) on the sample DB: Curves
coloured by a config key (the LR), parallel coordinates over the swept dimensions, and each
variant at its own best LR against the baseline at its own best LR (the Δ and CI from
results_db's delta_ci, checked here against hand-computed values)."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import results_db
from dashboard import compare, curvedata
from tests.support import dashboard_sample as sample
from tests.support.apppage import chart_datasets, open_page


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return sample.write_db(tmp_path_factory.mktemp("compare") / "results.db")


def _page(url: str, monkeypatch: pytest.MonkeyPatch, page: str, sweep: str) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", url)
    st.cache_data.clear()
    return open_page(page, sweep)


def test_curves_colour_by_a_config_key(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(db_url, monkeypatch, "Curves", sample.LR_SWEEP)
    box = at.selectbox(key="cv_color")
    # the keys that vary here: the LR and the gate's dimensions (none for the baseline)
    assert box.options[:2] == ["variant", "lr"] and "gate_position" in box.options
    assert "n_head" not in box.options
    box.set_value("lr").run()
    assert not at.exception
    spec = json.dumps(json.loads(at.get("vega_lite_chart")[0].proto.spec))
    assert '"field": "colour"' in spec and '"title": "lr"' in spec
    frames = [f for f in chart_datasets(at, 0) if "colour" in f.columns]
    assert frames
    for f in frames:  # every line is coloured by its row's LR, in numeric order
        assert sorted(set(f["colour"])) == ["1e-3", "2e-3", "4e-3", "8e-3"]
        for series, colour in zip(f["series"], f["colour"], strict=True):
            assert series.endswith(f"lr={colour}")
    assert curvedata.colour_order(["1e-2", "3e-3", "–", "1e-3"]) == ["1e-3", "3e-3", "1e-2", "–"]


def test_parallel_coordinates_over_swept_dimensions(db_url: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(db_url, monkeypatch, "Leaderboard", sample.SWEEP)
    assert "Parallel coordinates over the swept dimensions" in [s.value for s in at.subheader]
    board = results_db.open(db_url, readonly=True).leaderboard(sample.SWEEP)
    frame = compare.parallel_frame(board, "val/ppl")
    axes = frame.sort("order")["axis"].unique(maintain_order=True).to_list()
    assert axes[-2:] == ["val/ppl", "Δ% val/ppl"] and "position" in axes and "lr" not in axes
    mean = frame.filter(pl.col("axis") == "val/ppl")
    best, worst = board["mean"].min(), board["mean"].max()
    pos = dict(zip(mean["row"], mean["pos"], strict=True))
    assert pos["sdpa_elementwise"] == 0.0 and pos["sdpa_ns_sigmoid"] == 1.0  # 9.1 / 11.2
    base = [p for r, p in pos.items() if r == "baseline"][0]
    assert base == pytest.approx((10.2 - best) / (worst - best))
    gp = frame.filter((pl.col("axis") == "position") & (pl.col("row") == "value_elementwise"))
    assert gp["label"].to_list() == ["G2"]
    # the chart on the page draws exactly these rows
    last = len(at.get("vega_lite_chart")) - 1
    drawn = [f for f in chart_datasets(at, last) if "pos" in f.columns]
    assert set(drawn[0]["row"]) == set(board["variant"])  # one LR: rows are the variants


def test_best_vs_best_each_at_its_own_best_lr(db_url: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    at = _page(db_url, monkeypatch, "Leaderboard", sample.LR_SWEEP)
    at.toggle(key="lb_best_lr").set_value(True).run()
    assert not at.exception
    assert "Best vs best" in [s.value for s in at.subheader]
    table = next(d.value for d in at.dataframe
                 if "Δ% best vs best [95% CI]" in d.value.columns).set_index("variant")
    # val/ppl = exp(val/loss): the baseline is best at 2e-3 (2.30, 2.33), G1 at 4e-3 (2.22,
    # 2.24); the same seeds on both sides: paired, t(0.975, 1) = 12.706
    row = table.loc["sdpa_elementwise"]
    assert (row["its best LR"], row["baseline's best LR"], row["CI"]) == ("4e-3", "2e-3",
                                                                          "paired")
    d = [math.exp(2.22) - math.exp(2.30), math.exp(2.24) - math.exp(2.33)]
    base = (math.exp(2.30) + math.exp(2.33)) / 2
    mean, sd = sum(d) / 2, abs(d[0] - d[1]) / math.sqrt(2)
    half = 12.706205 * sd / math.sqrt(2)
    lo, hi = 100 * (mean - half) / base, 100 * (mean + half) / base
    assert row["Δ% best vs best [95% CI]"] == f"{100 * mean / base:+.1f}% [{lo:+.1f}, {hi:+.1f}]"
    assert "baseline" not in table.index


def test_parallel_coordinates_write_few_whole_labels(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the 57-run gates-toy sweep: every row's mean and Δ% was written at its
    height (19 overlapping labels per axis), and kv heads read "2.000" / "4.000". Read off
    the chart the Leaderboard draws (charts.parallel over compare.parallel_frame)."""
    from dashboard import charts, palette
    from tests.support import report_db

    url = report_db.build(f"sqlite:///{tmp_path_factory.mktemp('par') / 'toy.db'}")
    with results_db.open(url, readonly=True) as db:
        board = db.leaderboard(report_db.SWEEP)
    chart = charts.parallel(compare.parallel_frame(board, "val/ppl"),
                            palette.colors(board["variant"].unique().to_list(), "baseline"))
    spec = chart.to_dict()
    text = next(lay for lay in spec["layer"] if lay["mark"]["type"] == "text")
    written = pl.DataFrame(spec["datasets"][text["data"]["name"]])  # what the axes write
    per_axis = {a: sorted(g["label"].to_list())
                for (a,), g in written.group_by("axis", maintain_order=True)}
    assert per_axis["n_kv_head"] == ["2", "4"], per_axis
    for ax in ("val/ppl", "Δ% val/ppl", "lr"):  # a numeric axis: its two ends only
        assert len(per_axis[ax]) == 2, per_axis[ax]
    assert per_axis["lr"] == ["1e-1", "3e-3"]
    assert not [t for labels in per_axis.values() for t in labels if t.endswith(".000")]
