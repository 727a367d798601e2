"""The Overview's "Live runs" table must follow the sweep table beside it.

After a sweep ended, the page kept listing its last run as "running 360/400" under a sweep
table that said 0 running: the live table was cached on its own 3-s clock, so the page run
that the watcher starts when the counts change could read it from before the run ended, and
nothing refreshed it afterwards while idle. Real SQLite DB, runs registered by the submit path
(tests.support.synthdb) and played through the writer API; the page under AppTest.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st

import results_db
from dashboard import data
from tests.support import dashboard_sample as sample
from tests.support import synthdb
from tests.support.apppage import open_page

SWEEP = "ov-live"
STEPS = 400


@pytest.fixture()
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    u = f"sqlite:///{tmp_path / 'ov.db'}"
    spec = sample.sweep_spec(SWEEP, {"baseline": {}}, 1)
    spec["base"]["train"] = {**spec["base"]["train"], "steps": STEPS}
    with results_db.open(u) as db:
        (reg,) = synthdb.register(db, spec)
        synthdb.play(db, reg.id, "running", points=[(s, "train/loss", 3.0 - s / 400)
                                                      for s in range(10, 361, 10)])
    monkeypatch.setenv("GATESWEEP_DB", u)
    st.cache_data.clear()
    return u


def _live_rows(at) -> list[tuple[str, str]]:  # noqa: ANN001 - AppTest
    live = next((d.value for d in at.dataframe if "run" in d.value.columns), None)
    return [] if live is None else list(zip(live["status"], live["step"], strict=True))


def _running(at) -> int:  # noqa: ANN001 - AppTest
    sweeps = next(d.value for d in at.dataframe if "sweep" in d.value.columns
                  and "running" in d.value.columns and "run" not in d.value.columns)
    return int(sweeps.set_index("sweep").loc[SWEEP, "running"])


def test_live_runs_follow_the_sweep_table_after_the_last_run_ends(url: str) -> None:
    at = open_page("Overview", SWEEP)
    assert _running(at) == 1 and _live_rows(at) == [("running", f"360/{STEPS}")]
    with results_db.open(url) as db:  # the run ends
        (rid,) = db.runs(sweep=SWEEP)["id"].to_list()
        att = db.attempts(rid)[-1]
        db.log_summaries(rid, att.id, {"val/ppl": 9.0})
        db.finish_attempt(att.id, "succeeded")
    # the counts' 3-s cache runs out first (the watcher reads them on its own clock) and the
    # watcher reruns the page: the live table read 1 s before must not be shown with them
    data.sweep_status.clear()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert _running(at) == 0
    assert _live_rows(at) == []
    assert any(s.value == "Live runs (0)" for s in at.subheader)


def test_the_live_block_keeps_a_clock_while_idle(url: str) -> None:
    """The block that holds the live table is a fragment with a ``run_every`` when nothing
    is active too (it had None, so a stale table could never be replaced)."""
    from dashboard.views import common, overview

    seen: list[float | None] = []
    real = st.fragment

    def spy(func=None, *, run_every=None):  # noqa: ANN001, ANN202 - st.fragment's own shape
        def wrap(f):  # noqa: ANN001, ANN202
            if f.__name__ == "_status_block":
                seen.append(run_every)
            return real(f, run_every=run_every)
        return wrap if func is None else wrap(func)

    with results_db.open(url) as db:
        (rid,) = db.runs(sweep=SWEEP)["id"].to_list()
        db.finish_attempt(db.attempts(rid)[-1].id, "succeeded")
    st.cache_data.clear()
    mp = pytest.MonkeyPatch()
    mp.setattr(overview.st, "fragment", spy)
    try:
        at = open_page("Overview", SWEEP)
    finally:
        mp.undo()
    assert _live_rows(at) == []
    assert seen and seen[-1] == common.refresh_s(False) == 15  # GATESWEEP_DASHBOARD_IDLE_S


def test_a_page_opened_right_after_submit_says_runs_are_active(url: str) -> None:
    """The run counts are cached for 3 s; a page opened from the link `submit` prints
    within those 3 s did not find the new sweep in them and said "no run active" (and kept
    the slow idle refresh) while its runs were pending."""
    open_page("Overview", SWEEP)  # the counts are cached now, without the new sweep
    with results_db.open(url) as db:
        synthdb.register(db, sample.sweep_spec("just-submitted", {"baseline": {}}, 2))
    at = open_page("Ablation tables", "just-submitted")
    as_of = [c.value for c in at.caption if c.value.startswith("As of ")]
    assert as_of and "live: runs are active, checked every 3 s" in as_of[0], as_of


def test_an_idle_page_rechecks_as_often_as_the_knob_says(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.views import common

    monkeypatch.setenv("GATESWEEP_DASHBOARD_IDLE_S", "7")
    assert common.refresh_s(False) == 7 and common.refresh_s(True) == common.LIVE_REFRESH_S
    monkeypatch.setenv("GATESWEEP_DASHBOARD_IDLE_S", "0.5")  # below its 1 s floor
    with pytest.raises(ValueError, match="GATESWEEP_DASHBOARD_IDLE_S='0.5'"):
        common.refresh_s(False)
