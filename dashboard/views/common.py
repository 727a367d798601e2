"""Widgets shared by several pages."""

from __future__ import annotations

import streamlit as st


def show_rows(total: int, key: str, default: int = 100) -> int:
    """A cap on the rows drawn (an HTML table of thousands of rows is slow in the browser)."""
    if total <= default:
        return total
    limit = int(st.number_input(f"Rows shown (of {total})", 1, total, default, step=50, key=key))
    if limit < total:
        st.caption(f"Showing the first {limit} of {total} rows.")
    return limit
