"""A link's query values are data from anyone: crafted ones (a brush of the wrong kind, NaN,
a 400-digit number, 5,000 nested brackets) open the default view with one notice naming what
was dropped, never a traceback; JSON read from the DB is parsed within the same kind of bound
(a deeply nested stored DeepSpeed config on Run detail)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from dashboard import jsontext
from tests.support import report_db
from tests.support.apppage import APP

DEEP = "[" * 5000 + "]" * 5000
HUGE = "1" + "0" * 399


@pytest.fixture(scope="module")
def db_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("urlstate") / "r.db"
    report_db.build(f"sqlite:///{path}")
    return path


def _open(path: Path, monkeypatch: pytest.MonkeyPatch, page: str, **query: str) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", f"sqlite:///{path}")
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in {"page": page, "sweep": report_db.SWEEP, **query}.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _notices(at: AppTest) -> list[str]:
    return [str(i.value) for i in at.info if str(i.value).startswith("Ignored from the link")]


@pytest.mark.parametrize("brush", [
    '{"train.lr":["a","b"]}', "[0.001]", '{"a":1}', '{"train.lr":[NaN,Infinity]}',
    "[NaN,Infinity]", f'{{"train.lr":[0.01,{HUGE}]}}', '{"train.lr":[0.01,1e999]}',
    '{"train.lr":[0.01]}', '{"variant":[1,2]}', DEEP])
def test_a_crafted_brush_opens_every_run_with_one_notice(
        db_path: Path, monkeypatch: pytest.MonkeyPatch, brush: str) -> None:
    at = _open(db_path, monkeypatch, "Explore", ex_brush=brush)
    assert any(m.value == "**All 57 runs** (no brush)" for m in at.markdown)
    (notice,) = _notices(at)
    assert "ex_brush" in notice


def test_deep_or_huge_values_in_every_list_key(db_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    at = _open(db_path, monkeypatch, "Explore", ex_axes=DEEP, ex_diff=f"[1,{HUGE}]",
               ex_metric="x" * 5000)
    (notice,) = _notices(at)
    assert all(k in notice for k in ("ex_axes", "ex_diff", "ex_metric"))
    assert at.selectbox(key="ex_metric").value == "val/ppl"
    assert len(at.multiselect(key="ex_axes").value) > 1  # the default axes
    at = _open(db_path, monkeypatch, "Curves", cv_names=DEEP, cv_smooth="NaN")
    (notice,) = _notices(at)
    assert "cv_names" in notice and "cv_smooth" in notice
    assert list(at.multiselect(key="cv_names").value) == ["train/loss", "val/loss"]


def test_a_good_link_says_nothing(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = _open(db_path, monkeypatch, "Explore", ex_brush='{"train.lr":[0.02,0.2]}')
    assert not _notices(at)
    assert any("runs kept" in m.value for m in at.markdown)


def test_run_detail_shows_a_deeply_nested_stored_config_as_text(
        db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "deep.db"
    path.write_bytes(db_path.read_bytes())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE provenance SET deepspeed_config = ? WHERE run_id = 1",
                     ('{"a":' * 5000 + "1" + "}" * 5000,))
    conn.close()
    at = _open(path, monkeypatch, "Run detail", run="1")
    assert any(c.value.startswith('{"a":{"a":') for c in at.code)


def test_bounded_json() -> None:
    assert jsontext.depth('[{"a": "[[[["}, [1]]') == 2
    assert jsontext.loads('{"a": [1, 2.5, "x"]}', max_chars=100, max_depth=2) == \
        {"a": [1, 2.5, "x"]}
    for text in (DEEP, "[NaN]", "[Infinity]", f"[{HUGE}]", "[1e999]", "[" + "1," * 60 + "1]"):
        with pytest.raises(ValueError):
            jsontext.loads(text, max_chars=100, max_depth=2)
