"""Widgets shared by several pages."""

from __future__ import annotations

import datetime as dt
from typing import Any

import streamlit as st

from contract import env


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


# --- keeping a page current -------------------------------------------------------------
LIVE_REFRESH_S = 3  # while a run of the sweep is running or waiting for a driver


def refresh_s(active: bool) -> float:
    """How often a page rechecks the DB: LIVE_REFRESH_S while a run is active, else
    GATESWEEP_DASHBOARD_IDLE_S (a submit/rerun from the CLI still shows up on its own)."""
    return LIVE_REFRESH_S if active else env.seconds("GATESWEEP_DASHBOARD_IDLE_S")


def is_active(url: str, sweep: str | None) -> bool:
    """Whether a run of the sweep (any sweep when None) is running or waiting (pending, lost):
    the contract's live and waiting groups (dashboard.status)."""
    from dashboard import data
    from dashboard.status import ACTIVE_STATES

    frame = data.status_of(url, sweep)
    return any(int(frame[s].sum() or 0) for s in ACTIVE_STATES if s in frame.columns)


def as_of(active: bool, every: float) -> str:
    """'As of 15:04:05 UTC · live: checked every 3 s' (the time the page's data was read)."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%H:%M:%S")
    how = f"live: runs are active, checked every {every:g} s" if active else \
        f"no run active; checked every {every:g} s"
    return f"As of {now} UTC · {how}"


def watch(url: str, sweep: str | None, key: str) -> bool:
    """Keep a results page current: a fragment that re-reads the sweep's run counts every
    :func:`refresh_s` and reruns the whole page when they
    changed -- a finished run re-ranks the leaderboard, a started one joins Curves, a rerun
    moves Run detail on -- and always says "as of" when. ``run_every`` is fixed when a
    fragment is defined, so a page whose sweep turns active is rebuilt by that rerun with the
    faster interval. Returns whether the sweep is active."""
    from dashboard import data

    state = data.sweep_state(url, sweep)
    st.session_state[f"_watch_{key}"] = state
    active = is_active(url, sweep)
    every = refresh_s(active)
    st.fragment(run_every=every)(_watcher)(url, sweep, key, active, every)
    return active


def _watcher(url: str, sweep: str | None, key: str, active: bool, every: float) -> None:
    from dashboard import data

    if data.sweep_state(url, sweep) != st.session_state.get(f"_watch_{key}"):
        st.rerun()  # scope "app": the whole page, with the new state and interval
    st.caption(as_of(active, every))


def follow_new(key: str, options: list[Any], default: list[Any],
               limit: int | None = None) -> list[Any] | None:
    """For a keyed multiselect that the user may have changed: keep their picks (those still
    offered) and add each default that appeared since the last page run (a run that started
    after the page opened joins the chart). Returns the ``default`` to pass the widget: None
    once the widget has a state (passing both warns)."""
    known_key = f"_{key}_known"
    known = st.session_state.get(known_key)
    st.session_state[known_key] = list(default)
    if key not in st.session_state:
        return default
    offered = set(options)
    picks = [v for v in st.session_state[key] if v in offered]
    if known is not None:
        seen = set(known)
        picks += [v for v in default if v not in seen and v not in picks]
    st.session_state[key] = picks[:limit] if limit else picks
    return None


ROW_PX, HEAD_PX, MAX_TABLE_PX = 35, 38, 1200


def table_height(rows: int) -> int:
    """A dataframe tall enough for ``rows`` rows (up to MAX_TABLE_PX, then it scrolls):
    streamlit's default shows ~10 rows, and the ranked rows below them went unseen."""
    return min(HEAD_PX + ROW_PX * max(rows, 1) + 3, MAX_TABLE_PX)
