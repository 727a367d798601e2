"""The running app (`streamlit run`, 127.0.0.1, free port) in headless Chromium via Playwright,
on a seeded multi-seed DB with a single-LR sweep (``demo``,
tests.support.dashboard_sample.fill) and an LR
ladder (``demo-lr``, sample.fill_lr: baseline vs G1 at 4 LRs x 2 seeds), and an adaptive
sweep (``adapt``, tests.support.decide_sample) for the Decide page.

Each page is screenshotted (a temp dir, and $GATESWEEP_SCREENSHOT_DIR when set, e.g. docs/img/)
and checked for what a researcher needs on its first screen: the verdict sentence and CIs on the
leaderboard, the stability view for the LR sweep (absent for the single-LR one), no empty chart
(every chart canvas has ink), and one colour per variant across charts (read off the canvas
pixels: the palette's colours for the sweep's variants are there, no other variant colour is).

What the pages draw is read off the rendered SVG (tests/support/screenshot.shot_of: line
ends through the y axis, legend labels outside the chart, each mark's variant and colour, area
sizes, table heights): evaluation curves end at the measured value (sweep ``evals``), Run
detail follows a rerun, Leaderboard/Overview/Curves follow a sweep that turns live, the seeds
wording, Probes at 16 variants (``wide``), LR stability's states and sentence, one colour per
variant page to page, 16 table rows and the metric order. That SIGTERM stops the server is
checked on the real command in tests/dashboard/test_dashboard_process.py. Skipped where
/usr/bin/chromium (or $CHROMIUM) or playwright is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path

import polars as pl
import pytest

import results_db
from dashboard import explore, palette
from dashboard.boardtable import DELTA_PCT
from tests.support import dashboard_sample as sample
from tests.support import decide_sample, report_db, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

if not Path(screenshot.CHROMIUM).exists():
    pytest.skip(f"no Chromium at {screenshot.CHROMIUM}: apt-get install chromium "
                "(make system-deps)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip: .[dev])")

LR_COLORS = palette.colors(["baseline", "sdpa_elementwise"], "baseline")
# the palette's next colours: on the LR sweep's variant charts they must not appear at all
UNUSED = palette.COLORS[1:4]
IDLE_S = 5  # GATESWEEP_DASHBOARD_IDLE_S of the served dashboard
MIN_INK = 1  # data marks (lines, points, bars, bands) of a chart that is not empty


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'results.db'}"
    db = results_db.open(url)
    sample.fill(db)
    sample.fill_lr(db)
    sample.fill_evals(db)  # 5-point evaluation series
    sample.fill_wide(db)  # 16 variants
    decide_sample.fill(db)  # an adaptive sweep: the Decide page
    db.close()
    report_db.build(url)  # the 57-run gates-toy sweep (an LR ladder, 3 seeds)
    # the tests that follow a sweep changed from the CLI wait one idle recheck for the page to
    # see it: 5 s, not the product's 15 (the 3 s live interval is the product's)
    with screenshot.serve(url, idle_s=IDLE_S) as base, screenshot.browser() as b:
        yield base, b, url


def _capture(served, tmp_path: Path, page: str, sweep: str, wait_for: str, name: str,
             colors: list[str] | None = None, height: int = 1000) -> screenshot.Shot:
    with _captured(served, tmp_path, page, sweep, wait_for, name, colors, height) as (shot, _):
        return shot


@contextlib.contextmanager
def _captured(served, tmp_path: Path, page: str, sweep: str, wait_for: str, name: str,
              colors: list[str] | None = None, height: int = 1000):
    """_capture with the page kept open for the block: (its Shot, the page)."""
    base, b, _ = served
    first = tmp_path / name
    with screenshot.captured(b, screenshot.page_url(base, page, sweep), wait_for, first,
                             colors=colors or [], height=height) as (shot, p):
        assert first.stat().st_size > 10_000  # a real rendered PNG, not an empty page
        if os.environ.get("GATESWEEP_SCREENSHOT_DIR"):
            extra = Path(os.environ["GATESWEEP_SCREENSHOT_DIR"]) / name
            extra.parent.mkdir(parents=True, exist_ok=True)
            extra.write_bytes(first.read_bytes())
        yield shot, p


@pytest.fixture(scope="module")
def leaderboard_demo(served, tmp_path_factory: pytest.TempPathFactory
                     ) -> tuple[screenshot.Shot, list[str]]:
    """The demo sweep's Leaderboard, rendered once for the two tests that read it (the sweep
    is not written after the fill): its Shot, then the Metric picker's options as it lists
    them when opened."""
    with _captured(served, tmp_path_factory.mktemp("leaderboard"), "Leaderboard", "demo",
                   "Multiplicity correction", "dashboard-leaderboard.png") as (shot, p):
        p.locator("[data-testid=stSelectbox]").filter(has_text="Metric").first.click()
        p.locator("[role=option]").first.wait_for(timeout=20_000)
        metrics = [t.strip() for t in p.locator("[role=option]").all_inner_texts()]
    return shot, metrics


def _field(label: str, key: str) -> str | None:
    """'variant: x; lr: 1.00e-3' -> the value of ``key`` (a mark's aria-label)."""
    return next((p.split(": ", 1)[1] for p in label.split("; ") if p.startswith(key + ": ")),
                None)


def _no_empty_chart(shot: screenshot.Shot, at_least: int) -> None:
    assert len(shot.charts) >= at_least, shot.charts
    for c in shot.charts:
        assert c["w"] > 100 and c["h"] > 50 and c["ink"] >= MIN_INK, c


def _variant_colours(shot: screenshot.Shot, without_baseline: tuple[int, ...] = ()) -> None:
    """Every chart shows the palette's colour of each LR-sweep variant and no other (the
    charts ``without_baseline``, Δ-vs-baseline curves, show the gated variant only)."""
    for i, c in enumerate(shot.charts):
        base, gated, *unused = c["hits"]
        assert (base > 0 or i in without_baseline) and gated > 0, (i, c)
        assert max(unused) == 0, (i, c)


def test_overview_shows_live_runs(served, tmp_path: Path) -> None:
    shot = _capture(served, tmp_path, "Overview", "demo", "Live runs", "dashboard-overview.png")
    assert "Live runs (2)" in shot.text


def test_leaderboard_verdicts_and_cis(
        served, leaderboard_demo: tuple[screenshot.Shot, list[str]], tmp_path: Path) -> None:
    db = results_db.open(served[2], readonly=True)
    shot, _ = leaderboard_demo
    assert "Leaderboard — demo" in shot.text
    assert db.findings("demo").lines()[0] in shot.text  # the answers first, as the CLI
    assert "Δ val/ppl vs baseline (%), 95 % CI" in shot.text  # the dot plot's axis
    _no_empty_chart(shot, 1)  # the Δ ± CI dot plot
    assert "n = 1" not in shot.text
    lr = _capture(served, tmp_path, "Leaderboard", "demo-lr", "Multiplicity correction",
                  "dashboard-leaderboard-lr.png")
    assert db.findings("demo-lr").lines()[0] in lr.text
    assert "n = 1: no error bar" in lr.text


def test_stability_view_for_the_lr_sweep_only(served, tmp_path: Path) -> None:
    colors = [*LR_COLORS.values(), *UNUSED]
    shot = _capture(served, tmp_path, "LR stability", "demo-lr", "Max stable LR rule",
                    "dashboard-stability.png", colors=colors)
    assert "tolerance 5%" in shot.text
    _no_empty_chart(shot, 3)
    _variant_colours(shot)
    # G1 at 1e-3 trained 5.9 % above its best (2.355 vs 2.23 at 4e-3) from too
    # small a step: drawn "below best LR", never "unstable"; the answer is a sentence; the
    # spike axis says what it plots; no legend runs off the narrow charts
    with results_db.open(served[2], readonly=True) as db:
        assert db.stability("demo-lr", "val/loss", 0.05).sentence in shot.text
    states = {(_field(m, "variant"), _field(m, "lr")): _field(m, "state")
              for m in shot.detail[0]["symbols"] if _field(m, "state")}
    assert states[("sdpa_elementwise", "1.00e-3")] == "below best LR"
    assert "unstable" not in {s for (v, _), s in states.items() if v == "sdpa_elementwise"}
    assert states[("baseline", "8.00e-3")] == "unstable"
    assert shot.detail[1]["titles"][-1] == "loss spikes (total over seeds)"
    assert all(d["legend_clipped"] == [] for d in shot.detail), shot.detail
    single = _capture(served, tmp_path, "LR stability", "demo", "Sweeps",
                      "dashboard-stability-single.png")
    assert "LR stability" not in single.text  # not offered: the Overview is shown instead


def test_curves_one_colour_per_variant(served, tmp_path: Path) -> None:
    colors = [*LR_COLORS.values(), *UNUSED]
    shot = _capture(served, tmp_path, "Curves", "demo-lr", "training loss",
                    "dashboard-curves.png", colors=colors, height=2200)
    _no_empty_chart(shot, 4)  # loss, Δ loss, val/loss (points), Δ val/loss
    _variant_colours(shot, without_baseline=(1, 3))


def test_probes_same_palette(served, tmp_path: Path) -> None:
    colors = [*LR_COLORS.values(), *UNUSED]
    shot = _capture(served, tmp_path, "Probes", "demo-lr", "massive activations",
                    "dashboard-probes.png", colors=colors)
    drawn = [c for c in shot.charts if c["ink"] >= MIN_INK]
    assert drawn  # max activation per layer (the LR sweep logs no attention/gate probes)
    for c in drawn:
        assert c["hits"][0] > 0 and c["hits"][1] > 0 and max(c["hits"][2:]) == 0, c
    demo = _capture(served, tmp_path, "Probes", "demo", "Gate score histograms",
                    "dashboard-probes-demo.png", height=1600)
    _no_empty_chart(demo, 4)


def test_ablation_table_with_paper_direction(served, tmp_path: Path) -> None:
    shot = _capture(served, tmp_path, "Ablation tables", "demo", "Different scale",
                    "dashboard-ablation.png")
    assert "compare the DIRECTION" in shot.text


def test_run_detail(served, tmp_path: Path) -> None:
    shot = _capture(served, tmp_path, "Run detail", "demo", "Attempts",
                    "dashboard-run-detail.png")
    assert "Rerun this run" in shot.text
    _no_empty_chart(shot, 1)


# --- an open tab follows its sweep without a reload ---------------------------------------
def _live_sweep(url: str, name: str, variants: tuple[str, ...]) -> dict[str, int]:
    """A sweep of one seed per variant (G1 for every non-baseline): the baseline succeeded,
    the others pending. Returns {variant: run id}."""
    from tests.support import synthdb

    db = results_db.open(url)
    regs = synthdb.register(db, sample.sweep_spec(name, {v: _delta(v) for v in variants}, 1))
    ids = {r.run.variant: r.id for r in regs}
    _finish(db, ids[variants[0]], 10.0)
    db.close()
    return ids


def _delta(variant: str) -> dict:
    """The sweep-file delta of a live-sweep variant: the baseline, or G1 elementwise."""
    gates = [dict(g) for g in sample.SAMPLE[1].gates]
    return {} if variant == "baseline" else {"model.gates": gates}


def _finish(db, rid: int, ppl: float) -> None:
    att = db.start_attempt(rid, host="h")
    db.log_summaries(rid, att.id, {"val/ppl": ppl, "val/loss": 2.3})
    db.finish_attempt(att.id, "succeeded")


def _open(served, page: str, sweep: str, wait_for: str):
    base, b, _ = served
    p = b.new_page(viewport={"width": 1600, "height": 1000})
    p.goto(screenshot.page_url(base, page, sweep), wait_until="domcontentloaded")
    p.get_by_text(wait_for, exact=False).first.wait_for(state="visible", timeout=60_000)
    return p


def _main_text(p) -> str:
    return p.locator("section.stMain, [data-testid=stMain]").first.inner_text()


def test_results_page_follows_its_sweep_without_a_reload(served) -> None:
    """The open Leaderboard said "(8 pending)" after every run had finished; it
    now re-reads when the sweep's run counts change, and always says "As of"."""
    url = served[2]
    ids = _live_sweep(url, "live-lb", ("baseline", "sdpa_elementwise"))
    p = _open(served, "Leaderboard", "live-lb", "As of")
    try:
        # "As of" is the page's first line: the leaderboard below it may still be rendering
        p.get_by_text("sdpa_elementwise (1 pending)").first.wait_for(timeout=40_000)
        with results_db.open(url) as db:
            _finish(db, ids["sdpa_elementwise"], 9.0)
        p.get_by_text("sdpa_elementwise (1 pending)").wait_for(state="detached", timeout=40_000)
        p.get_by_text("no run active", exact=False).first.wait_for(timeout=40_000)
        text = _main_text(p)
        assert "As of " in text and "No result yet" not in text
    finally:
        p.close()


def test_run_detail_follows_a_rerun_in_the_same_tab(served) -> None:
    """After a rerun the same tab showed "pending, Attempts (1)" for the whole run;
    it now follows the run (pending -> running, Attempts (2)) and the picker's label too."""
    url = served[2]
    ids = _live_sweep(url, "live-rd", ("baseline",))
    p = _open(served, "Run detail", "live-rd", "Attempts (1)")
    try:
        p.get_by_text("status succeeded", exact=False).first.wait_for(timeout=40_000)
        with results_db.open(url) as db:  # what the rerun button's spawn_rerun writes first
            db.set_status([ids["baseline"]], "pending", strict=True)
        p.get_by_text("status pending", exact=False).first.wait_for(timeout=40_000)
        with results_db.open(url) as db:  # the rerun's driver claims it
            db.start_attempt(ids["baseline"], host="h2")
        p.get_by_text("Attempts (2)", exact=False).first.wait_for(timeout=40_000)
        text = _main_text(p)
        assert "status running" in text and "Live: refreshed every 3 s" in text
        # the run picker's label follows too (a selectbox shows it outside the main text)
        boxes = p.eval_on_selector_all(  # a selectbox shows its value in an input or a div
            "[data-testid=stSelectbox]", "els => els.map(e => e.innerText + ' | ' + "
            "Array.from(e.querySelectorAll('input')).map(i => i.value + ' ' + "
            "(i.getAttribute('aria-label') || '')).join(' '))")
        assert any(f"{ids['baseline']} · baseline-s0 · running" in b for b in boxes), boxes
    finally:
        p.close()


# --- each visual defect, read off the rendered page ---------------------------------------
def test_curves_draw_evaluation_series_as_measured(served, tmp_path: Path) -> None:
    """The EMA (0.6 by default) moved a 5-point val/loss series' last point far from its
    value; the val/loss line must end at the measured seed mean and the Δ at the raw Δ."""
    shot = _capture(served, tmp_path, "Curves", sample.EVAL_SWEEP, "validation loss",
                    "dashboard-curves-evals.png", height=2200)
    train, _, val, dval = shot.detail[:4]
    assert val["titles"] == ["step", "val/loss"] and dval["titles"] == ["step", "Δ val/loss"]
    ends = {ln["series"]: ln["end"] for ln in val["lines"]}
    v = sample.EVAL_VAL
    for variant in ("baseline", "sdpa_elementwise"):  # read through the y axis: ~0.01/px
        assert ends[variant] == pytest.approx((v[(variant, 0)][-1] + v[(variant, 1)][-1]) / 2,
                                              abs=0.02), ends
    assert dval["lines"][0]["end"] == pytest.approx(-0.10, abs=0.02)
    assert "Raw values (evaluation series are never smoothed)." in shot.text
    # train/loss: the smoothed line over the raw one, drawn faintly (one of each per variant)
    assert sorted(ln["opacity"] for ln in train["lines"]) == [0.3, 0.3, 1, 1]


def test_probes_scale_to_16_variants(served, tmp_path: Path) -> None:
    """Every variant drawn by default (the leaderboard's top row too), legends whole,
    per-layer charts full width, histogram panels readable (they were hairline bars)."""
    shot = _capture(served, tmp_path, "Probes", sample.WIDE_SWEEP, "Gate score histograms",
                    "dashboard-probes-wide.png", height=3000)
    *layers, hist = shot.detail
    assert len(layers) == 3
    for d, n in zip(layers, (16, 16, 15), strict=True):  # the baseline has no gate score
        assert d["w"] > 900 and len(d["legend"]) == n and d["legend_clipped"] == [], d
        assert len({ln["series"] for ln in d["lines"]}) == n
    assert len(hist["areas"]) == 15  # one panel per gated variant
    assert all(w >= 150 and h >= 40 for w, h in hist["areas"]), hist["areas"]


def test_leaderboard_words_colours_and_tables(
        served, leaderboard_demo: tuple[screenshot.Shot, list[str]], tmp_path: Path) -> None:
    """'needs >= k seeds' says what k is for, the caption names the seeds for the observed
    Δ; each variant in its palette colour (as on every other page), never a verdict hue; 16
    rows drawn without a 10-row clip, the metric list quality first."""
    colors = palette.colors([v.name for v in sample.SAMPLE], "baseline")
    shot, shown = leaderboard_demo  # shown: the Metric picker's options
    labels = shot.detail[0]["texts"]
    needs = [t for t in labels if t.startswith("needs >=")]
    assert needs and all(t.endswith("seeds for a ±1% effect") for t in needs), labels
    assert '"seeds for Δ": to confirm the effect observed' in shot.text
    drawn = shot.detail[0]["colours"]
    assert drawn and all(c == [colors[v]] for v, c in drawn.items()), drawn
    curves = _capture(served, tmp_path, "Curves", "demo", "training loss",
                      "dashboard-curves-demo.png", height=1400)
    for d in curves.detail:  # the same variant, the same colour, page to page
        assert all(c == [colors[v]] for v, c in d["colours"].items()), d["colours"]
    wide = _capture(served, tmp_path, "Leaderboard", sample.WIDE_SWEEP, "Multiplicity correction",
                    "dashboard-leaderboard-wide.png", height=1600)
    assert wide.tables[0] >= 38 + 35 * 16  # header + 16 rows, not 10 and a scrollbar
    with results_db.open(served[2], readonly=True) as db:
        from dashboard.tables import metric_order
        expected = metric_order(db.summary_names("demo"))
    assert shown and shown == expected[:len(shown)], shown
    assert shown[0] == "val/ppl"


def test_overview_and_curves_follow_a_sweep_that_turns_live(
        served, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The Overview's refresh was off when nothing was live at load and never turned
    on; Curves never added a run started after it opened. Its own DB and server: the shared
    one always has live runs (the sample's running run)."""
    from tests.support import synthdb

    url = f"sqlite:///{tmp_path_factory.mktemp('quiet') / 'results.db'}"

    def start(db, variant: str):  # a run of "quiet" that reports a curve
        (run,) = synthdb.register(db, sample.sweep_spec("quiet", {variant: _delta(variant)}, 1))
        att = db.start_attempt(run.id, host="h")
        db.log_metrics(run.id, att.id, [(s, "train/loss", 5.0 - s / 50) for s in range(1, 21)])
        return att

    with results_db.open(url) as db:  # nothing live at load: one finished run
        db.finish_attempt(start(db, "baseline").id, "succeeded")
    b = served[1]
    with screenshot.serve(url, idle_s=IDLE_S) as base:
        ov = b.new_page(viewport={"width": 1600, "height": 1000})
        cv = b.new_page(viewport={"width": 1600, "height": 1400})
        try:
            ov.goto(screenshot.page_url(base, "Overview"), wait_until="domcontentloaded")
            ov.get_by_text("Live runs (0)").wait_for(timeout=60_000)
            assert "no run active" in _main_text(ov)
            cv.goto(screenshot.page_url(base, "Curves", "quiet"), wait_until="domcontentloaded")
            cv.get_by_text("training loss").first.wait_for(timeout=60_000)
            with results_db.open(url) as db:  # the sweep turns live: a run starts, reports
                start(db, "sdpa_elementwise")
            ov.get_by_text("Live runs (1)").wait_for(timeout=40_000)
            ov.get_by_text("Refreshed every 3 s while runs are active").wait_for(timeout=20_000)
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                legend = screenshot.shot_of(cv).detail[0].get("legend", [])
                if "sdpa_elementwise" in legend:
                    break
                cv.wait_for_timeout(250)
            assert legend == ["baseline", "sdpa_elementwise"], legend
        finally:
            ov.close()
            cv.close()


# --- what the pages draw, read off the SVG -------------------------------------------------
HIST_SWEEP = "hist-range"
HIST_EDGES = {"sdpa_elementwise": 1.0, "sdpa_silu": 20.0, "value_elementwise": 1.0}


def _hist_sweep(url: str) -> None:
    """Three gated variants whose gate-score histograms span 0..1 (sigmoid) or 0..20 (SiLU)."""
    from tests.support import synthdb

    deltas = {"baseline": {}, "sdpa_elementwise": {"model.gates": [{"position": "G1"}]},
              "sdpa_silu": {"model.gates": [{"position": "G1", "activation": "silu"}]},
              "value_elementwise": {"model.gates": [{"position": "G2"}]}}
    with results_db.open(url) as db:
        for r in synthdb.register(db, sample.sweep_spec(HIST_SWEEP, deltas, 1)):
            top = HIST_EDGES.get(r.run.variant)
            arts = [] if top is None else [("gate_histogram", {"data": {
                "edges": [top * i / 20 for i in range(21)],
                "counts": [float(20 - abs(i - 3)) for i in range(20)]}})]
            synthdb.play(db, r.id, summaries={"val/ppl": 10.0}, artifacts=arts)


# per chart: its axes (orientation by label spread, the largest label) and its legends
# (title, and per entry the symbol's size and dash)
# at least n charts and every one drawn: Streamlit mounts the chart elements before Vega draws
# their svgs, so waiting on some axes can still find a chart without one
_ALL_CHARTS_DRAWN = """n => {
  const cs = Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]'));
  return cs.length >= n && cs.every(c => c.querySelector('svg g.role-axis')); }"""

_AXES_LEGENDS_JS = """() => Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]'))
  .map(el => {
    const svg = el.querySelector('svg');
    if (!svg) return null;
    const num = t => parseFloat((t || '').replace(/\u2212/g, '-').replace(/,/g, ''));
    const axes = Array.from(svg.querySelectorAll('g.role-axis')).map(a => {
      const ls = Array.from(a.querySelectorAll('g.role-axis-label text')).map(t => {
        const b = t.getBoundingClientRect();
        return {v: num(t.textContent), t: t.textContent, x: b.left, y: b.top};
      });
      const horiz = ls.length >= 2 && Math.abs(ls[0].y - ls[1].y) < 1;
      return {horiz: horiz, labels: ls.map(l => l.t),
              max: Math.max(...ls.map(l => l.v).filter(v => isFinite(v)))};
    });
    const legends = Array.from(svg.querySelectorAll('g.role-legend')).map(g => {
      const title = g.querySelector('g.role-legend-title text');
      return {title: title ? title.textContent : null,
              entries: Array.from(g.querySelectorAll('g.role-legend-symbol path')).map(p => {
                const b = p.getBoundingClientRect();
                return {w: b.width, h: b.height, dash: p.getAttribute('stroke-dasharray')};
              })};
    });
    return {axes: axes, legends: legends};
  })"""


def test_probes_histograms_have_their_own_axes_and_lr_legend_shows_dashes(served) -> None:
    """The gate-score histograms shared one 0-20 x axis (a sigmoid gate's 0..1 scores
    were a spike at 0): each panel now has its own; the LR legend under the per-layer charts
    showed the same dot for every LR: its entries are now line samples in their dash."""
    base, b, url = served
    _hist_sweep(url)
    p = b.new_page(viewport={"width": 1600, "height": 2400})
    try:
        p.goto(screenshot.page_url(base, "Probes", HIST_SWEEP), wait_until="domcontentloaded")
        p.get_by_text("Gate score histograms").first.wait_for(timeout=60_000)
        p.wait_for_function("() => document.querySelectorAll("
                            "'[data-testid=stVegaLiteChart] svg g.mark-area').length > 0",
                            timeout=40_000)
        p.wait_for_function(_ALL_CHARTS_DRAWN, arg=1, timeout=40_000)
        charts = p.evaluate(_AXES_LEGENDS_JS)
        xs = [a["max"] for a in charts[-1]["axes"] if a["horiz"]]
        assert len(xs) == len(HIST_EDGES), charts[-1]["axes"]  # one x axis per panel
        assert sorted(xs) == [1.0, 1.0, 20.0], xs
        p.goto(screenshot.page_url(base, "Probes", sample.LR_SWEEP),
               wait_until="domcontentloaded")
        p.get_by_text("massive activations", exact=False).first.wait_for(timeout=60_000)
        p.wait_for_function("() => Array.from(document.querySelectorAll("
                            "'[data-testid=stVegaLiteChart] g.role-legend-title text'))"
                            ".some(t => t.textContent === 'lr')", timeout=40_000)
        legends = [lg for c in p.evaluate(_AXES_LEGENDS_JS) if c for lg in c["legends"]
                   if lg["title"] == "lr"]
    finally:
        p.close()
    assert legends
    for lg in legends:
        assert len(lg["entries"]) == len(sample.LRS)
        assert all(e["w"] >= 10 and e["h"] <= 4 for e in lg["entries"]), lg  # a line, no dot
        assert len({e["dash"] for e in lg["entries"]}) == len(sample.LRS), lg


def test_scaling_charts_first_whole_legends_and_si_axes(served, tmp_path: Path) -> None:
    """On the 57-run gates-toy sweep: the charts come before the sentences (collapsed),
    no legend is cut off, and the FLOPs axis is not written 100,000,000,000."""
    with _captured(served, tmp_path, "Scaling", report_db.SWEEP, "Δ vs tokens",
                   "dashboard-scaling-toy.png", height=1400) as (shot, p):
        # the same render read for its axes and layout
        p.wait_for_function(_ALL_CHARTS_DRAWN, arg=2, timeout=40_000)
        charts = p.evaluate(_AXES_LEGENDS_JS)
        first_chart = p.locator("[data-testid=stVegaLiteChart]").first.bounding_box()
        sentences = p.locator("[data-testid=stExpander]").first.bounding_box()
    assert len(shot.detail) == 2
    for d in shot.detail:
        assert d["legend_clipped"] == [] and d["legend"], d["legend"]
        assert {"3e-3", "1e-2", "3e-2", "1e-1"} <= set(d["legend"])  # the LR dash legend
    assert all(charts), charts
    x_labels = [t for c in charts for a in c["axes"] if a["horiz"] for t in a["labels"]]
    assert x_labels and not [t for t in x_labels if re.search(r"\d,\d{3},\d{3}", t)], x_labels
    assert first_chart["y"] < sentences["y"]


# per chart: each text mark's overhang past the plot area's right edge
# and past the chart element's right edge, in px (<= 0: inside)
_TEXT_OVERFLOW_JS = """() => Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]'))
  .map(el => {
    const svg = el.querySelector('svg');
    if (!svg) return null;
    const box = el.getBoundingClientRect();
    // the plot area: the view group's background (the x axis's domain line is not drawn)
    const frame = svg.querySelector('g.mark-group.role-frame path.background');
    const plot = frame.getBoundingClientRect();
    return Array.from(svg.querySelectorAll('g.mark-text.role-mark text')).map(t => {
      const b = t.getBoundingClientRect();
      return [t.textContent, Math.round(b.right - plot.right), Math.round(b.right - box.right)];
    });
  })"""


def test_leaderboard_verdict_labels_end_inside_the_chart(served) -> None:
    """33.7: on the gates-toy sweep "needs >= 13 seeds for a ±1% effect", written after its
    CI at the right of the dot plot, ran past the chart's edge and was cut: Vega fitted the
    chart to the text's width as it measured it, and the page's font drew it a little wider.
    The labels now end inside the plot, clear of that measurement."""
    base, b, _ = served
    p = b.new_page(viewport={"width": 1600, "height": 1200})
    try:
        p.goto(screenshot.page_url(base, "Leaderboard", report_db.SWEEP),
               wait_until="domcontentloaded")
        p.get_by_text("Multiplicity correction", exact=False).first.wait_for(timeout=60_000)
        p.wait_for_function("() => document.querySelectorAll("
                            "'[data-testid=stVegaLiteChart] svg g.mark-text text').length > 0",
                            timeout=40_000)
        screenshot.settle(p)  # the run over and the chart redrawn at its width
        labels = p.evaluate(_TEXT_OVERFLOW_JS)[0]
    finally:
        p.close()
    needs = [t for t, _, _ in labels if t.startswith("needs >=")]
    assert needs, labels
    # inside the plot, not in room Vega's autosize made beside it from its own measure
    assert all(plot <= 0 and chart <= 0 for _, plot, chart in labels), labels


# --- W&B-like slicing on the Explore page --------------------------------------------------
# Explore's parallel chart: each axis rule's x and the plot's top/bottom, in page pixels
_AXIS_RULES_JS = """() => {
  const el = document.querySelectorAll('[data-testid=stVegaLiteChart]')[0];
  const svg = el.querySelector('svg');
  const plot = svg.querySelector('g.mark-group.role-frame path.background')
    .getBoundingClientRect();
  const rules = {};
  svg.querySelectorAll('g.mark-rule.role-mark line, g.mark-rule.role-mark path')
    .forEach(l => {
      const label = l.getAttribute('aria-label') || '';
      const m = label.split('; ').find(p => p.startsWith('axis: '));
      if (m) { const b = l.getBoundingClientRect(); rules[m.slice(6)] = b.left + b.width / 2; }
    });
  return {rules: rules, top: plot.top, bottom: plot.bottom};
}"""
# the scatter's dots: each one's aria-label (its run, variant, x and metric)
_DOTS_JS = """() => {
  const charts = document.querySelectorAll('[data-testid=stVegaLiteChart]');
  const svg = charts[1].querySelector('svg');
  return Array.from(svg.querySelectorAll('g.mark-symbol.role-mark path'))
    .map(p => p.getAttribute('aria-label') || '');
}"""
_TABLES_TEXT_JS = """() => Array.from(document.querySelectorAll('[data-testid=stTable] table'))
  .map(t => Array.from(t.querySelectorAll('tr')).map(r => Array.from(r.querySelectorAll('th, td'))
    .map(c => c.innerText.trim())))"""
# the runs of gates-toy whose LR is 3e-2 or 1e-1: the three ladders' upper two rungs (3 x 2 x 3
# seeds); the seven one-LR ablation rows run at the baseline's tuned 1e-2, below the brush
TOY_UPPER_LRS = 3 * 2 * 3


def _explore(served, query: str = "", height: int = 2400):
    base, b, _ = served
    p = b.new_page(viewport={"width": 1500, "height": height})
    p.goto(screenshot.page_url(base, "Explore", report_db.SWEEP) + query,
           wait_until="domcontentloaded")
    p.get_by_text("Config diff").first.wait_for(timeout=60_000)
    p.wait_for_function("() => document.querySelectorAll("
                        "'[data-testid=stVegaLiteChart] svg g.mark-rule').length > 0",
                        timeout=40_000)
    screenshot.settle(p)
    return p


def _query(p) -> dict[str, str]:
    import urllib.parse

    return dict(urllib.parse.parse_qsl(urllib.parse.urlparse(p.url).query))


# the parallel chart's run lines: how many, and how many are grey (left out by the brushes)
_LINES_JS = """() => {
  const svg = document.querySelectorAll('[data-testid=stVegaLiteChart]')[0].querySelector('svg');
  const ps = Array.from(svg.querySelectorAll('g.mark-line.role-mark path'));
  return {lines: ps.length, grey: ps.filter(p => p.getAttribute('stroke') === '#d0d0d0').length};
}"""
# the y (page px) of the parallel chart's tick label ``text`` nearest the x ``at``
_TICK_Y_JS = """([text, at]) => {
  const svg = document.querySelectorAll('[data-testid=stVegaLiteChart]')[0].querySelector('svg');
  const ts = Array.from(svg.querySelectorAll('g.mark-text.role-mark text'))
    .filter(t => t.textContent === text).map(t => t.getBoundingClientRect())
    .sort((a, b) => Math.abs(a.left - at) - Math.abs(b.left - at));
  return ts.length ? ts[0].top + ts[0].height / 2 : null;
}"""
TOY_UPPER_UNGATED = 2 * 3  # of those, the baseline's (no gate position): 2 LRs x 3 seeds


def _lines(p) -> dict[str, int]:
    """The parallel chart's lines once drawn (a drag redraws it: a fresh chart)."""
    p.wait_for_function("() => { const c = document.querySelector("
                        "'[data-testid=stVegaLiteChart] svg'); return c && "
                        "c.querySelectorAll('g.mark-line.role-mark path').length > 0; }",
                        timeout=30_000)
    screenshot.settle(p)  # the run over, its chart drawn and no longer changing
    return p.evaluate(_LINES_JS)


def _y(geo: dict, pos: float) -> float:
    """The page y of position ``pos`` on the parallel chart (``geo``: _AXIS_RULES_JS's)."""
    pad = explore.PAD  # the y domain is [-pad, 1 + pad], top to bottom of the plot
    return geo["top"] + (geo["bottom"] - geo["top"]) * (1 + pad - pos) / (1 + 2 * pad)


def _drag(p, x: float, y0: float, y1: float) -> None:
    screenshot.settle(p)  # the chart of the last rerun, not one about to be replaced
    p.mouse.move(x - 25, y0)
    p.mouse.down()
    p.mouse.move(x, (y0 + y1) / 2, steps=5)
    p.mouse.move(x + 25, y1, steps=5)
    p.mouse.up()


def test_explore_brushing_filters_runs_and_the_link_keeps_it(served) -> None:
    """Drag across the train.lr axis of the parallel coordinates over its upper half: the runs
    at 3e-2 and 1e-1 are kept; a second drag over the gate position axis's '–' (no gate) keeps
    the runs both brushes keep (AND), the others' lines turn grey, the scatter draws only the
    kept runs, no script error is thrown; both brushes go into the URL, and that URL opened in
    a new tab draws the same selection (every line, the same ones grey). A third brush, on the
    metric's axis, narrows the selection again."""
    p = _explore(served)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        geo = p.evaluate(_AXIS_RULES_JS)
        x, top = geo["rules"]["train.lr"], geo["top"]
        # from above the top to pos 0.5
        _drag(p, x, top + 2, _y(geo, 0.5))
        p.get_by_text(f"{TOY_UPPER_LRS} of 57 runs kept", exact=False).first.wait_for(
            timeout=30_000)
        assert _lines(p) == {"lines": 57, "grey": 57 - TOY_UPPER_LRS}
        pos_x = p.evaluate(_AXIS_RULES_JS)["rules"]["model.gates.0.position"]
        y = p.evaluate(_TICK_Y_JS, ["–", pos_x])
        _drag(p, pos_x, y - 12, y + 12)
        p.get_by_text(f"{TOY_UPPER_UNGATED} of 57 runs kept", exact=False).first.wait_for(
            timeout=30_000)
        lines = _lines(p)
        dots = p.evaluate(_DOTS_JS)
        link = p.url
        brush = json.loads(_query(p)["ex_brush"])
        # a third axis: val/ppl's upper quarter (> 8.47) keeps the baseline at 1e-1 only
        ppl_x = p.evaluate(_AXIS_RULES_JS)["rules"]["val/ppl"]
        _drag(p, ppl_x, top + 2, _y(geo, 0.75))
        p.get_by_text("3 of 57 runs kept", exact=False).first.wait_for(timeout=30_000)
    finally:
        p.close()
    assert not errors, errors
    assert lines == {"lines": 57, "grey": 57 - TOY_UPPER_UNGATED}, lines
    lrs = {_field(d, "train.lr") for d in dots}
    assert len(dots) == TOY_UPPER_UNGATED and lrs == {"0.03", "0.1"}, (len(dots), lrs)
    assert {_field(d, "variant") for d in dots} == {"baseline"}
    lo, hi = brush["train.lr"]
    assert 1e-2 < lo < 3e-2 and hi >= 1e-1 * 0.99, brush
    assert brush["model.gates.0.position"] == ["–"], brush
    base, b, _ = served
    again = b.new_page(viewport={"width": 1500, "height": 2400})
    again.on("pageerror", lambda e: errors.append(str(e)))
    try:
        again.goto(link, wait_until="domcontentloaded")
        again.get_by_text(f"{TOY_UPPER_UNGATED} of 57 runs kept", exact=False).first.wait_for(
            timeout=60_000)
        lines = _lines(again)
    finally:
        again.close()
    assert not errors, errors
    assert lines == {"lines": 57, "grey": 57 - TOY_UPPER_UNGATED}, lines


def test_explore_second_drag_on_a_brushed_axis_replaces_its_range(served) -> None:
    """Brush train.lr's upper half, then drag its lower part: the second range replaces the
    first (in the URL, the count and the grey lines). The axes stay where they were drawn:
    the brush's shaded box used to widen the chart's scales (x to [-1, 7]), every axis moved,
    and the second drag, aimed where the axis had been, spanned none and was ignored."""
    p = _explore(served)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        geo = p.evaluate(_AXIS_RULES_JS)
        x = geo["rules"]["train.lr"]
        _drag(p, x, _y(geo, 1.04), _y(geo, 0.5))
        p.get_by_text(f"{TOY_UPPER_LRS} of 57 runs kept", exact=False).first.wait_for(
            timeout=30_000)
        screenshot.settle(p)  # the run over: the URL written after the count
        first = json.loads(_query(p)["ex_brush"])
        moved = p.evaluate(_AXIS_RULES_JS)
        # 3e-3 and 1e-2: the runs the first brush left out
        _drag(p, x, _y(geo, 0.45), _y(geo, -0.04))
        lower = 57 - TOY_UPPER_LRS
        p.get_by_text(f"{lower} of 57 runs kept", exact=False).first.wait_for(timeout=30_000)
        screenshot.settle(p)
        lines = _lines(p)
        second = json.loads(_query(p)["ex_brush"])
    finally:
        p.close()
    assert not errors, errors
    assert moved == geo, (geo, moved)
    assert 1e-2 < first["train.lr"][0] < 3e-2, first
    assert list(second) == ["train.lr"], second
    lo, hi = second["train.lr"]
    assert lo < 3e-3 and 1e-2 < hi < 3e-2, second
    assert lines == {"lines": 57, "grey": TOY_UPPER_LRS}, lines


def test_explore_scatter_group_by_and_config_diff(served) -> None:
    """The metric against a hyperparameter (one dot per run at its value), grouping by any
    config key (a table of the groups from results_db.read.grouping), and the config diff of the
    runs picked -- each read off the page, the view opened from a link."""
    with results_db.open(served[2], readonly=True) as db:
        runs = db.runs(sweep=report_db.SWEEP, with_config=False)
        ppl = dict(zip(*db.summaries(sweep=report_db.SWEEP, names=["val/ppl"])
                       .select("run_id", "value"), strict=True))
    first = runs.filter(pl.col("variant") == "baseline")["id"][0]
    other = runs.filter(pl.col("variant") == "kv_heads_x2")["id"][0]
    q = ("&ex_x=model.n_kv_head&ex_group=model.gates.0.position"
         f"&ex_diff=%5B{first}%2C{other}%5D")
    p = _explore(served, q)
    try:
        dots = p.evaluate(_DOTS_JS)
        tables = p.evaluate(_TABLES_TEXT_JS)
    finally:
        p.close()
    # the scatter: 57 dots, kv heads 4 only for kv_heads_x2's 3 runs, each at its val/ppl
    assert len(dots) == 57
    kv = [d for d in dots if _field(d, "model.n_kv_head") == "4"]
    assert {_field(d, "variant") for d in kv} == {"kv_heads_x2"} and len(kv) == 3
    values = sorted(float(_field(d, "val/ppl")) for d in dots)
    assert values == pytest.approx(sorted(ppl.values()), rel=1e-3)
    groups, diff = tables
    assert [r[0] for r in groups[1:]] == ["G1", "G2", "–"]
    assert [r[1] for r in groups[1:]] == ["33", "3", "21"]  # runs per gate position
    from results_db.read.grouping import group_stats
    frame = runs.with_columns(pl.col("gate_position").alias("k")).join(
        pl.DataFrame({"id": list(ppl), "v": list(ppl.values())}), on="id")
    expect = group_stats(frame, "k", "v")
    g1 = next(r for r in groups[1:] if r[0] == "G1")
    assert g1[3] == f"{expect.filter(pl.col('group') == 'G1')['mean'][0]:.3f}"
    keys = [r[0] for r in diff[1:]]
    assert "model.n_kv_head" in keys and "name" not in keys
    row = next(r for r in diff[1:] if r[0] == "model.n_kv_head")
    assert row[1:] == ["2", "4"]


def test_curves_view_in_the_url_and_grouped_by_a_config_key(served) -> None:
    """A Curves link with its controls in the query opens that view (only val/loss, log y,
    one line per gate position: W&B's grouping); changing a control rewrites the address,
    and another page drops the Curves keys."""
    import urllib.parse

    base, b, _ = served
    q = urllib.parse.urlencode({"cv_names": '["train/loss"]', "cv_log": "true",
                                "cv_group": "gate_position", "cv_delta": "false"})
    p = b.new_page(viewport={"width": 1500, "height": 1400})
    try:
        p.goto(screenshot.page_url(base, "Curves", sample.LR_SWEEP) + "&" + q,
               wait_until="domcontentloaded")
        p.get_by_text("training loss").first.wait_for(timeout=60_000)
        p.wait_for_function("() => document.querySelectorAll("
                            "'[data-testid=stVegaLiteChart] svg g.mark-line').length > 0",
                            timeout=40_000)
        screenshot.settle(p)
        shot = screenshot.shot_of(p)
        text = shot.text
        assert "validation loss" not in text and "Grouped by gate_position" in text
        (chart,) = shot.detail
        series = {ln["series"] for ln in chart["lines"]}
        assert series == {"G1", "–"}, series  # 8 runs (2 variants x 4 LRs) in two lines
        assert "gate_position" in chart["legend"] or set(chart["legend"]) >= {"G1", "–"}
        assert _query(p)["cv_log"] == "true"
        p.get_by_text("log y").first.click()  # the toggle's label
        p.wait_for_function("() => location.search.includes('cv_log=false')", timeout=20_000)
        p.get_by_text("Overview").first.click()  # the sidebar's page radio
        p.wait_for_function("() => location.search.includes('page=Overview')",
                            timeout=20_000)
        # the page switch and the Overview run that drops the Curves keys are two address
        # writes: wait for the second (CI under load asserted between them)
        try:
            p.wait_for_function("() => !location.search.includes('cv_')", timeout=20_000)
        except Exception:  # noqa: BLE001 - the assertion below says what stayed
            pass
        assert not [k for k in _query(p) if k.startswith("cv_")], p.url
    finally:
        p.close()


# every page once at a laptop's 1280 x 800 (the sidebar open): (page, sweep, text it shows)
SMALL = [("Answers", report_db.SWEEP, "Answers"), ("Overview", report_db.SWEEP, "Sweeps"),
         ("Leaderboard", report_db.SWEEP, "Multiplicity correction"),
         ("LR stability", report_db.SWEEP, "Max stable LR rule"),
         ("Ablation tables", report_db.SWEEP, "Ablation tables"),
         ("Scaling", report_db.SWEEP, "Δ vs tokens"), ("Curves", report_db.SWEEP, "training loss"),
         ("Probes", sample.SWEEP, "Gate score histograms"),
         ("Probes", sample.LR_SWEEP, "Gate score histograms"),
         ("Explore", report_db.SWEEP, "Config diff"), ("Run detail", report_db.SWEEP, "Attempts"),
         ("Decide", decide_sample.SWEEP, "rows decided")]
# the parallel chart's axis names as drawn: visible (not hidden for overlap), in full
_AXIS_NAMES_JS = """() => {
  const svg = document.querySelectorAll('[data-testid=stVegaLiteChart]')[0].querySelector('svg');
  return Array.from(svg.querySelectorAll('g.role-axis-label text'))
    .filter(t => getComputedStyle(t).opacity !== '0' && t.getAttribute('opacity') !== '0')
    .map(t => t.textContent);
}"""
# columns a reader needs without scrolling the Leaderboard's grid sideways: the condition of
# every row (its LR) and what it cost
LEADERBOARD_FIRST = ("variant", "lr", DELTA_PCT, "verdict", "wall s", "tokens")
# the Decide page's rows: each row's condition, its interval and where it stands
DECIDE_FIRST = ("variant", "lr", "seeds so far", "interval (%)", "verdict", "state")
FIRST_COLUMNS = {"Leaderboard": LEADERBOARD_FIRST, "Decide": DECIDE_FIRST}


def test_every_page_fits_1280_by_800(served) -> None:
    """At 1280 x 800 nothing is cut off: no page scrolls sideways, no chart, legend or label
    ends past the viewport or its chart, the Leaderboard shows each row's LR and cost in its
    grid's first screen and the Decide page (an adaptive sweep) each row's LR, interval and
    verdict in its own (the lr and cost columns were off-screen, the Probes histograms'
    fourth column and legends, the Scaling LR legends and Explore's axis names were cut)."""
    base, b, _ = served
    p = b.new_page(viewport={"width": 1280, "height": 800})
    cut: dict[str, list[str]] = {}
    try:
        for page, sweep, text in SMALL:
            screenshot.open_settled(p, screenshot.page_url(base, page, sweep), text, 60_000)
            if found := screenshot.overflow(p):
                cut[f"{page} ({sweep})"] = found
            if page == "Explore":  # every axis named in full (Vega hides labels that overlap)
                named = p.evaluate(_AXIS_NAMES_JS)
                axes = list(p.evaluate(_AXIS_RULES_JS)["rules"])
                if len(named) != len(axes) or not all(
                        a.endswith(n) for n, a in zip(named, axes, strict=True)):
                    cut["Explore axes"] = [f"named {named}, axes {axes}"]
            if page in FIRST_COLUMNS:
                shown = screenshot.grid_headers(p)[0]
                if missing := [c for c in FIRST_COLUMNS[page] if c not in shown]:
                    cut[f"{page} grid"] = [f"off-screen: {missing} (shown: {shown})"]
    finally:
        p.close()
    assert not cut, cut
