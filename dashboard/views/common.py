"""Widgets shared by several pages."""

from __future__ import annotations

from typing import Any

import streamlit as st


def show_rows(total: int, key: str, default: int = 100) -> int:
    """A cap on the rows drawn (an HTML table of thousands of rows is slow in the browser)."""
    if total <= default:
        return total
    limit = int(st.number_input(f"Rows shown (of {total})", 1, total, default, step=50, key=key))
    if limit < total:
        st.caption(f"Showing the first {limit} of {total} rows.")
    return limit


def show_chart(chart: Any, where: Any = None, extra: int = 110) -> None:
    """Draw an Altair chart at its plot height plus room for its axes and bottom legend: with
    the default height="content", streamlit's autosize "fit" squeezes layered charts to a
    sliver. Facet charts (no top-level height) keep "content"."""
    import altair as alt

    where = where or st
    h = getattr(chart, "height", alt.Undefined)
    height = int(h) + extra if isinstance(h, (int, float)) else "content"
    where.altair_chart(chart, width="stretch", height=height)
