"""The live pages, driven through the app (AppTest) on a small DB written through the
writer API: evaluation curves are drawn as measured (the EMA only smooths train/* and the raw
curve is drawn under it; the Δ curve is from raw values), every results page says "As of"
and shows a finished run on its next run (results are cached per sweep state, not for a TTL),
a run started after Curves opened joins the picked runs, the LR-stability page does not call
under-trained low LRs unstable, and small helpers (metric order, best-LR rows, verdict text)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import streamlit as st
from streamlit.runtime.caching import cache_utils
from streamlit.testing.v1 import AppTest

import results_db
from dashboard import curvedata
from dashboard.boardtable import DELTA
from dashboard.tables import fmt_num, fmt_verdict, metric_order
from dashboard.views.leaderboard import best_lr_rows
from dashboard.views.stability import UNDER, lr_states
from tests.support.apppage import APP, chart_datasets, open_page

SWEEP = "evals"
# val/loss at steps 20..100 per (variant, seed): the EMA (0.6) over these 5 points would end
# far above the last one (1.465 was drawn as ~2.2)
VAL = {("baseline", 0): [4.0, 3.0, 2.2, 1.8, 1.50], ("baseline", 1): [4.1, 3.1, 2.3, 1.9, 1.52],
       ("gated", 0): [3.9, 2.8, 2.0, 1.6, 1.40], ("gated", 1): [4.0, 2.9, 2.1, 1.7, 1.42]}


def _config(variant: str, seed: int) -> dict[str, Any]:
    gates = [{"position": "G1"}] if variant == "gated" else []
    return {"name": f"{variant}-s{seed}", "sweep": SWEEP, "seed": seed,
            "model": {"n_layer": 2, "d_model": 64, "n_head": 4, "n_kv_head": 4, "gates": gates},
            "train": {"lr": 3e-3, "steps": 100}}


def _run(db: Any, rid: int, variant: str, seed: int) -> None:
    att = db.start_attempt(rid, host="h")
    pts = [(s, "train/loss", 5.0 * math.exp(-s / 30) + 1.4 + 0.3 * (s % 2)) for s in
           range(1, 101)]
    pts += [(20 * (i + 1), "val/loss", v) for i, v in enumerate(VAL[(variant, seed)])]
    db.log_metrics(rid, att.id, pts)
    final = VAL[(variant, seed)][-1]
    db.log_summaries(rid, att.id, {"val/loss": final, "val/ppl": math.exp(final),
                                   "cost/wall_s": 10.0 + seed, "cost/tokens": 1000.0,
                                   "params/total": 1e5})
    db.finish_attempt(att.id, "succeeded")


class CacheClock:
    """The clock st.cache_data's TTLs are read on (``cache_utils.TTLCACHE_TIMER``): the real
    monotonic time plus what a test moved it on, so a TTL can run out without a sleep."""

    def __init__(self) -> None:
        self.ahead_s = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead_s

    def wait(self, seconds: float) -> None:
        """What ``time.sleep(seconds)`` does to every cached read's age."""
        self.ahead_s += seconds


@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[CacheClock]:
    """Caches made from here on age by ``clock`` (the url fixture clears them after this)."""
    c = CacheClock()
    monkeypatch.setattr(cache_utils, "TTLCACHE_TIMER", c)
    yield c
    st.cache_data.clear()  # no cache left on this clock for the next test


@pytest.fixture()
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: CacheClock) -> str:
    from results_db import NewRun

    u = f"sqlite:///{tmp_path / 'live.db'}"
    db = results_db.open(u)
    sid = db.ensure_sweep(SWEEP, "# test", "live pages")
    news = [NewRun(name=f"{v}-s{s}", fingerprint=f"fp-{v}-{s}", variant=v, seed=s,
                   config=_config(v, s)) for v in ("baseline", "gated") for s in (0, 1, 2)]
    ids = {r.name: r.id for r in db.register_runs(sid, news).to_run}
    for (v, s) in VAL:
        _run(db, ids[f"{v}-s{s}"], v, s)  # seed 2 of each stays pending
    db.close()
    monkeypatch.setenv("GATESWEEP_DB", u)
    st.cache_data.clear()
    return u


def _page(page: str) -> AppTest:
    return open_page(page, SWEEP)


def test_eval_curves_are_drawn_as_measured_and_delta_is_raw(url: str) -> None:
    at = _page("Curves")
    titles = [s.value for s in at.subheader]
    assert titles == ["training loss", "validation loss"]
    assert at.slider(key="cv_smooth").value == 0.6  # the default EMA is on ...
    # ... yet the val/loss line ends at the measured seed mean (1.51 / 1.41), not an EMA
    val = max(chart_datasets(at, 2), key=len)
    last = val[val["x"] == val["x"].max()].set_index("series")["value"]
    assert last["baseline"] == pytest.approx(1.51) and last["gated"] == pytest.approx(1.41)
    # the Δ val/loss curve is the raw seed means' difference at every evaluation
    delta = max(chart_datasets(at, 3), key=len)
    assert sorted(delta["value"].round(6)) == [-0.2, -0.2, -0.2, -0.1, -0.1]
    # train/loss: smoothed line over the raw one (a faint layer), both in the chart
    spec = json.dumps(json.loads(at.get("vega_lite_chart")[0].proto.spec))
    assert '"opacity": 0.3' in spec
    sizes = sorted(len(d) for d in chart_datasets(at, 0))
    assert sizes.count(sizes[-1]) >= 2  # the raw and the smoothed series, same points
    captions = [c.value for c in at.caption]
    assert any(c.endswith("EMA 0.60 over the raw curve (faint).") for c in captions)
    assert any(c.endswith("Raw values (evaluation series are never smoothed).") for c in captions)
    assert not any("smoothed" in c and "Δ" in c for c in captions)


def test_smoothing_applies_to_training_series_only() -> None:
    assert curvedata.smoothable("train/loss") and curvedata.smoothable("train/grad_norm")
    assert not any(curvedata.smoothable(n) for n in ("val/loss", "val/ppl", "val/c4/ppl",
                                                     "probe/max_activation"))


def test_results_pages_say_as_of_and_show_a_run_that_finished(url: str,
                                                             clock: CacheClock) -> None:
    for page in ("Overview", "Leaderboard", "Ablation tables", "Curves", "Probes",
                 "Run detail"):
        at = _page(page)
        assert any(c.value.startswith("As of ") and " UTC · " in c.value for c in at.caption), \
            page
    at = _page("Leaderboard")
    assert list(at.dataframe[0].value["n"]) == ["2", "2"]
    assert any("live: runs are active, checked every 3 s" in c.value for c in at.caption)
    db = results_db.open(url)
    pending = db.runs(sweep=SWEEP, status="pending")
    for rid, variant in zip(pending["id"], pending["variant"], strict=True):
        att = db.start_attempt(rid, host="h")
        db.log_summaries(rid, att.id, {"val/ppl": math.exp(VAL[(variant, 1)][-1] + 0.01)})
        db.finish_attempt(att.id, "succeeded")
    clock.wait(3.2)  # the run counts' own TTL; the leaderboard's (15 s) must not matter
    at.run()
    assert list(at.dataframe[0].value["n"]) == ["3", "3"]
    assert any("no run active; checked every 15 s" in c.value for c in at.caption)


def test_a_run_started_later_joins_the_curves(url: str, clock: CacheClock) -> None:
    at = _page("Curves")
    db = results_db.open(url)
    pending = db.runs(sweep=SWEEP, status="pending")["id"].to_list()
    assert not set(pending) & set(at.multiselect(key="cv_runs").value)
    before = list(at.multiselect(key="cv_runs").value)
    at.multiselect(key="cv_runs").set_value(before[1:]).run()  # the user dropped one
    att = db.start_attempt(pending[0], host="h")
    db.log_metrics(pending[0], att.id, [(1, "train/loss", 5.0)])
    clock.wait(3.2)  # the run counts' TTL
    at.run()
    picked = at.multiselect(key="cv_runs").value
    assert pending[0] in picked and before[0] not in picked  # added; the user's drop kept


def test_leaderboard_cost_beside_delta_and_best_lr_rows(url: str) -> None:
    at = _page("Leaderboard")
    table = at.dataframe[0].value.set_index("variant")
    assert table.loc["gated", "wall s"] == "10.500" and table.loc["gated", "tokens"] == "1000"
    assert table.loc["gated", "FLOPs ≈6NT"] == "6.00e+08"  # 6 x 1e5 params x 1000 tokens
    api = results_db.open(url, readonly=True).leaderboard(SWEEP).filter(variant="gated")
    lo, hi = api["ci_low"][0], api["ci_high"][0]
    assert table.loc["gated", DELTA] == \
        f"{fmt_num(api['delta'][0])} [{fmt_num(lo)}, {fmt_num(hi)}]"  # all negative here
    board = pl.DataFrame({"variant": ["a", "a", "b", "b"], "lr": [1e-3, 3e-3, 1e-3, 3e-3],
                          "rank": [3, 1, 2, None]})
    assert best_lr_rows(board).rows() == [("a", 3e-3, 1), ("b", 1e-3, 2)]


def test_lr_below_the_best_is_under_trained_not_unstable() -> None:
    curve = pl.DataFrame({"lr_group_key": ["k"] * 4, "lr": [1e-4, 1e-3, 3e-3, 1e-2],
                          "diverged": [0, 0, 0, 1], "stable": [False, True, True, False]})
    summary = pl.DataFrame({"lr_group_key": ["k"], "best_lr": [1e-3]})
    assert lr_states(curve, summary)["state"].to_list() == [UNDER, "stable", "stable",
                                                            "unstable"]


def test_metric_list_and_verdict_words() -> None:
    names = ["cost/tokens", "cost/wall_s", "data/epochs", "probe/max_activation", "train/loss",
             "val/loss", "val/ppl", "bench/hellaswag", "params/total"]
    assert metric_order(names) == ["val/ppl", "val/loss", "bench/hellaswag",
                                   "probe/max_activation", "train/loss", "params/total",
                                   "cost/tokens", "cost/wall_s", "data/epochs"]
    assert fmt_verdict("needs >= 417 seeds") == "needs >= 417 seeds for a ±1% effect"
    assert fmt_verdict("better") == "better" and fmt_verdict(None) == "–"


def test_a_link_to_a_sweep_newer_than_the_cached_list_opens_that_sweep(url: str) -> None:
    """The sidebar's sweep list is cached for 3 s: a link to a sweep made within those 3 s
    (what `submit` prints) opened the newest *cached* sweep instead, and its live watcher
    followed that other sweep for good (found by tests/e2e/test_dashboard_browser.py)."""
    _page("Overview")  # caches the list: [evals]
    with results_db.open(url) as db:
        db.ensure_sweep("fresh", "# test", "made after the list was cached")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["sweep"] = "fresh"
    at.query_params["page"] = "Run detail"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.selectbox(key="sweep").value == "fresh"
    assert at.header[0].value == "Run detail — fresh"
