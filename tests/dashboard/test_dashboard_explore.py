"""The Explore page under AppTest on the 57-run gates-toy sweep (tests.support.report_db): its
config keys come from the runs' RunSpecs, the group table is results_db's group_stats, the
config diff lists what differs among the picked runs, and a link whose values no longer fit
(an unknown key, bad JSON) opens the default view instead of failing. The brushing, the
scatter and the URL round trip are driven in Chromium (tests/e2e/test_dashboard_browser.py)."""

from __future__ import annotations

import polars as pl
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

import results_db
from dashboard import explore
from results_db.read.grouping import group_stats
from tests.support import report_db
from tests.support.apppage import APP


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return report_db.build(f"sqlite:///{tmp_path_factory.mktemp('explore') / 'r.db'}")


def _open(url: str, monkeypatch: pytest.MonkeyPatch, **query: str) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", url)
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in {"page": "Explore", "sweep": report_db.SWEEP, **query}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_keys_groups_and_diff(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _open(db_url, monkeypatch)
    keys = at.selectbox(key="ex_group").options[1:]
    assert keys[:3] == ["variant", "train.lr", "model.gates.0.position"]
    assert {"model.n_kv_head", "model.nonlinearity", "seed"} <= set(keys)
    assert keys[-1] == "seed" and "name" not in keys
    at.selectbox(key="ex_group").set_value("train.lr").run()
    shown = at.table[0].value
    with results_db.open(db_url, readonly=True) as db:
        runs = db.runs(sweep=report_db.SWEEP, with_config=False)
        ppl = db.summaries(sweep=report_db.SWEEP, names=["val/ppl"])
    frame = runs.join(ppl.select(pl.col("run_id").alias("id"), "value"), on="id")
    expect = group_stats(frame, "lr", "value")
    assert list(shown.iloc[:, 0]) == ["3e-3", "1e-2", "3e-2", "1e-1"]
    assert list(shown["runs"]) == [str(n) for n in expect["runs"]] == ["9", "30", "9", "9"]
    assert list(shown["mean val/ppl"]) == [f"{m:.3f}" for m in expect["mean"]]
    # the default diff: the first run against the first run of another variant
    diff = at.table[1].value.set_index("key")
    assert "model.gates.0.position" in diff.index and "seed" not in diff.index
    assert list(at.multiselect(key="ex_diff").value) == [1, 13]


def test_a_link_that_no_longer_fits_opens_the_default_view(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _open(db_url, monkeypatch, ex_group="model.no_such_key", ex_brush="{not json",
               ex_axes='["variant", "gone"]', ex_metric="val/nothing")
    assert at.selectbox(key="ex_group").value == "none"
    assert at.selectbox(key="ex_metric").value == "val/ppl"
    assert list(at.multiselect(key="ex_axes").value) == ["variant"]
    assert any(m.value == "**All 57 runs** (no brush)" for m in at.markdown)


def test_brushes_in_data_units() -> None:
    table = pl.DataFrame({"id": [1, 2, 3, 4], "name": list("abcd"), "variant": list("aabb"),
                          "seed": [0, 1, 0, 1], "status": ["succeeded"] * 4,
                          "train.lr": [1e-3, 1e-2, 1e-1, 1e-2],
                          "pos": ["G1", None, "G2", "G1"]})
    # the LR axis is log10: positions 0, 0.5, 1; a drag over 0.4..1.0 keeps 1e-2 and 1e-1
    lo, hi = explore.brush_of(table, "train.lr", 0.4, 1.0)
    assert lo == pytest.approx(10 ** -2.2) and hi == pytest.approx(1e-1)
    assert explore.brushed(table, {"train.lr": [lo, hi]}) == [2, 3, 4]
    levels = explore.brush_of(table, "pos", 0.9, 1.0)  # G1, G2, '–' at 0, 0.5, 1
    assert levels == ["–"]
    assert explore.brushed(table, {"pos": ["–", "G2"], "train.lr": [lo, hi]}) == [2, 3]


def test_curves_link_values_of_the_wrong_kind_fall_back(db_url: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Curves link whose values have the wrong type or range opens the defaults."""
    monkeypatch.setenv("GATESWEEP_DB", db_url)
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in {"page": "Curves", "sweep": report_db.SWEEP, "cv_smooth": "[1]",
                 "cv_from": "-3", "cv_log": "yes", "cv_names": '"val/loss"',
                 "cv_group": "lr"}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="cv_smooth").value == 0.6 and at.number_input(key="cv_from").value == 1
    assert at.toggle(key="cv_log").value is False
    assert list(at.multiselect(key="cv_names").value) == ["train/loss", "val/loss"]
    assert at.selectbox(key="cv_group").value == "lr"  # a good value is taken
    assert any(c.value.startswith("Grouped by lr") for c in at.caption)


def test_axis_names_are_short_and_distinct() -> None:
    keys = ["variant", "train.lr", "model.gates.0.position", "data.seed", "train.seed", "seed"]
    assert explore.short_names(keys) == ["variant", "lr", "position", "data.seed",
                                         "train.seed", "seed"]


COLON = "bench/acc:top:1"  # a benchmark metric named with colons
MARKUP = "**b** ![i](http://x/y.png) $x$"  # a name that renders as bold, an image, LaTeX


@pytest.fixture(scope="module")
def odd_names(tmp_path_factory: pytest.TempPathFactory) -> str:
    """gates-toy with two more summaries per run, under the names above."""
    url = report_db.build(f"sqlite:///{tmp_path_factory.mktemp('names') / 'r.db'}")
    with results_db.open(url) as db:
        for rid in db.runs(sweep=report_db.SWEEP, with_config=False)["id"].to_list():
            db.log_summaries(rid, db.attempts(rid)[-1].id, {COLON: 0.5 + rid / 100,
                                                            MARKUP: 1.0 + rid})
    return url


@pytest.mark.parametrize("metric", [COLON, MARKUP])
def test_metric_names_from_the_db_draw_and_show_as_typed(
        odd_names: str, metric: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ':' in a metric name crashed the scatter (Altair read 'top:1' as a field type), and
    a name's Markdown rendered (bold, an image fetched from anywhere, LaTeX): the scatter
    draws it, and every heading and caption shows it as typed (mdtext.md)."""
    from dashboard.mdtext import md
    from tests.support.apppage import chart_datasets

    at = _open(odd_names, monkeypatch, ex_metric=metric, ex_group="variant")
    assert at.selectbox(key="ex_metric").value == metric
    assert f"{md(metric)} vs train.lr" in [h.value for h in at.subheader]
    drawn = max(chart_datasets(at, 1), key=len)  # the scatter: one dot per run
    assert len(drawn) == 57 and drawn["yval"].notna().all()
    assert not [m.value for m in (*at.markdown, *at.caption, *at.subheader)
                if metric in m.value]  # never raw
