"""Fixtures shared by the dashboard's AppTest modules."""

from __future__ import annotations

import pytest
import streamlit as st


@pytest.fixture()
def url(db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The app's DB (``GATESWEEP_DB``) is the module's own ``db_url``, with no cached reads
    left from another module's DB."""
    monkeypatch.setenv("GATESWEEP_DB", db_url)
    st.cache_data.clear()
    return db_url
