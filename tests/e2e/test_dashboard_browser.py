"""The running app (`streamlit run`, 127.0.0.1, free port) in headless Chromium via Playwright,
on a seeded multi-seed DB with a single-LR sweep (``demo``,
tests.support.dashboard_sample.fill) and an LR
ladder (``demo-lr``, sample.fill_lr: baseline vs G1 at 4 LRs x 2 seeds).

Each page is screenshotted (a temp dir, and $GATESWEEP_SCREENSHOT_DIR when set, e.g. docs/img/)
and checked for what a researcher needs on its first screen: the verdict sentence and CIs on the
leaderboard, the stability view for the LR sweep (absent for the single-LR one), no empty chart
(every chart canvas has ink), and one colour per variant across charts (read off the canvas
pixels: the palette's colours for the sweep's variants are there, no other variant colour is).
Skipped where /usr/bin/chromium (or $CHROMIUM) or playwright is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import results_db
from dashboard import palette, screenshot
from tests.support import dashboard_sample as sample

pytestmark = pytest.mark.browser

if not Path(screenshot.CHROMIUM).exists():
    pytest.skip(f"no Chromium at {screenshot.CHROMIUM}: apt-get install chromium "
                "(make system-deps)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip: .[dev])")

LR_COLORS = palette.colors(["baseline", "sdpa_elementwise"], "baseline")
# the palette's next colours: on the LR sweep's variant charts they must not appear at all
UNUSED = palette.COLORS[1:4]
MIN_INK = 1  # data marks (lines, points, bars, bands) of a chart that is not empty


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'results.db'}"
    db = results_db.open(url)
    sample.fill(db)
    sample.fill_lr(db)
    db.close()
    with screenshot.serve(url) as base, screenshot.browser() as b:
        yield base, b, url


def _capture(served, tmp_path: Path, page: str, sweep: str, wait_for: str, name: str,
             colors: list[str] | None = None, height: int = 1000) -> screenshot.Shot:
    base, b, _ = served
    first = tmp_path / name
    shot = screenshot.capture(b, screenshot.page_url(base, page, sweep), wait_for, first,
                              colors=colors or [], height=height)
    assert first.stat().st_size > 10_000  # a real rendered PNG, not an empty page
    if os.environ.get("GATESWEEP_SCREENSHOT_DIR"):
        extra = Path(os.environ["GATESWEEP_SCREENSHOT_DIR"]) / name
        extra.parent.mkdir(parents=True, exist_ok=True)
        extra.write_bytes(first.read_bytes())
    return shot


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


def test_leaderboard_verdicts_and_cis(served, tmp_path: Path) -> None:
    db = results_db.open(served[2], readonly=True)
    shot = _capture(served, tmp_path, "Leaderboard", "demo", "beat the baseline",
                    "dashboard-leaderboard.png")
    assert "Leaderboard — demo" in shot.text
    assert db.verdict_summary("demo") in shot.text
    assert "Δ val/ppl vs baseline (%), 95 % CI" in shot.text  # the dot plot's axis
    _no_empty_chart(shot, 1)  # the Δ ± CI dot plot
    assert "n = 1" not in shot.text
    lr = _capture(served, tmp_path, "Leaderboard", "demo-lr", "beat the baseline",
                  "dashboard-leaderboard-lr.png")
    assert db.verdict_summary("demo-lr") in lr.text
    assert "n = 1: no error bar" in lr.text


def test_stability_view_for_the_lr_sweep_only(served, tmp_path: Path) -> None:
    colors = [*LR_COLORS.values(), *UNUSED]
    shot = _capture(served, tmp_path, "LR stability", "demo-lr", "Max stable LR rule",
                    "dashboard-stability.png", colors=colors)
    assert "tolerance 5%" in shot.text
    _no_empty_chart(shot, 3)
    _variant_colours(shot)
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
