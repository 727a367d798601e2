"""Open one dashboard page under streamlit's AppTest and read its charts' data: what the
AppTest-level dashboard tests share (the browser tests drive the real server instead)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


def open_page(page: str, sweep: str, timeout_s: float = 60) -> AppTest:
    """The app at ``?sweep=...&page=...`` after one run, with no exception on it (the DB is
    $GATESWEEP_DB: the caller sets it)."""
    at = AppTest.from_file(APP, default_timeout=timeout_s)
    at.query_params["sweep"] = sweep
    at.query_params["page"] = page
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_datasets(at: AppTest, i: int) -> list[Any]:
    """The data frames behind the page's ``i``-th Vega-Lite chart (one per layer dataset)."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    chart = at.get("vega_lite_chart")[i]
    return [convert_arrow_bytes_to_pandas_df(d.data.data) for d in chart.proto.datasets]
