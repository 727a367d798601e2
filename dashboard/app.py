"""gatesweep dashboard: `orchestrator dashboard` runs `streamlit run dashboard/app.py`.

Reads the results DB named by $GATESWEEP_DB (default sqlite:///results.db), opened read-only,
through dashboard/data.py only. Pages live in dashboard/views/ (not `pages/`, which Streamlit
would turn into its own multipage navigation); the sidebar picks the sweep, then the page.
The "LR stability" page is offered only for sweeps with an LR axis, "Decide" only for sweeps
with a ``decide:`` block.
"""

from __future__ import annotations

from typing import cast

import streamlit as st

from dashboard import data, urlstate
from dashboard.mdtext import md
from dashboard.views import (
    ablation,
    curves,
    decide,
    explore,
    findings,
    leaderboard,
    overview,
    probes,
    run_detail,
    scaling,
    stability,
)
from results_db import DBNotFound

PAGES = {
    "Answers": findings.render,  # the first screen: the study's answers (db.findings)
    "Overview": overview.render,
    "Leaderboard": leaderboard.render,
    "LR stability": stability.render,
    "Ablation tables": ablation.render,
    "Scaling": scaling.render,
    "Curves": curves.render,
    "Probes": probes.render,
    "Explore": explore.render,
    "Decide": decide.render,
    "Run detail": run_detail.render,
}


def _pick_sweep(url: str) -> str | None:
    try:
        names = data.sweeps(url)["name"].to_list()
    except Exception as exc:  # noqa: BLE001 - a wrong URL or a dead server: say which, stop
        hint = " `orchestrator submit sweeps/gates.yaml` creates one." \
            if isinstance(exc, DBNotFound) else ""
        st.error(f"Cannot read the results DB {url}: {type(exc).__name__}: {exc}. Set "
                 f"GATESWEEP_DB (or `orchestrator dashboard --db URL`) to a results DB.{hint}")
        st.stop()
    if note := data.schema_note(url):
        st.sidebar.warning(md(note))
    if not names:
        return None
    wanted = urlstate.read("sweep", "")
    if wanted and wanted not in names:  # a sweep newer than the 3-s cached list (a link that
        data.sweeps.clear()  # `submit` just printed): read the list again, not show another
        names = data.sweeps(url)["name"].to_list()
        if wanted not in names:
            urlstate.drop("sweep", "no such sweep")
    index = names.index(wanted) if wanted in names else len(names) - 1  # newest by default
    return cast("str | None", st.sidebar.selectbox("Sweep", names, index=index, key="sweep"))


def _pages(url: str, sweep: str | None) -> list[str]:
    """The pages the sweep has something for: LR stability needs an LR axis, Decide a
    ``decide:`` block."""
    lr = sweep is not None and stability.has_lr_axis(url, sweep)
    adaptive = sweep is not None and decide.has_decide(url, sweep)
    return [p for p in PAGES if (p != "LR stability" or lr) and (p != "Decide" or adaptive)]


def main() -> None:
    st.set_page_config(page_title="gatesweep", layout="wide")
    url = data.db_url()
    st.sidebar.title("gatesweep")
    sweep = _pick_sweep(url)
    pages = _pages(url, sweep)
    wanted = urlstate.read("page", "", options=pages)
    if st.session_state.get("page") not in (None, *pages):  # e.g. LR stability, other sweep
        del st.session_state["page"]
    page = st.sidebar.radio("Page", pages, key="page",
                            index=pages.index(wanted) if wanted in pages else 0)
    st.sidebar.caption(f"DB: `{url}` (read-only)")
    # the address bar names the view shown, so a copied link reopens it (dashboard/urlstate)
    for key, value in (("page", page), ("sweep", sweep)):
        if value is not None and st.query_params.get(key) != value:
            st.query_params[key] = value
    urlstate.keep_page(page)
    slot = st.empty()  # the page's first line: what the link held that was dropped
    try:
        _draw(url, sweep, page)
    finally:
        urlstate.notice(slot)


def _draw(url: str, sweep: str | None, page: str) -> None:
    if sweep is None:  # no sweep yet: only the Overview has something to show
        if page in ("Overview", "Answers"):
            overview.render(url, None)
        else:
            st.info(f"No sweeps in {url} yet: run `orchestrator submit sweeps/gates.yaml`.")
        return
    PAGES[page](url, sweep)


main()
