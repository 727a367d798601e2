"""The HTML report (`orchestrator report`) opened from disk in the real Chromium the dashboard's
browser tests use (tests/support/screenshot.browser), at 1600 x 1200 and 1280 x 800: every
chart renders with its marks, nothing is cut off, the page asks for nothing over the network,
no script error, and the numbers it shows are the CLI's (leaderboard and verdict sentence);
mixed provenance is said on top. The sweep is the
57-run gates-toy registered by the real submit path (tests/support/report_db.py), with one
variant trained on another commit and torch version. Skipped where Chromium or playwright
is missing."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from dashboard.boardtable import DELTA_PCT
from dashboard.report import content
from dashboard.tables import fmt_delta_ci, fmt_mean_std
from orchestrator.cli.main import main
from tests.support import report_db, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow]

if not Path(screenshot.CHROMIUM).exists():
    pytest.skip(f"no Chromium at {screenshot.CHROMIUM}: apt-get install chromium "
                "(make system-deps)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip: .[dev])")

DRAWN = "window.gatesweepReport && window.gatesweepReport.charts > 0 && " \
        "window.gatesweepReport.rendered + window.gatesweepReport.errors.length === " \
        "window.gatesweepReport.charts"
MARKS = "svg path, svg line, svg rect, svg circle, svg text"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The report of the mixed gates-toy sweep, written by the CLI, and the CLI's leaderboard
    (JSON) to check it against; built once for both window sizes."""
    tmp = tmp_path_factory.mktemp("report")
    url = report_db.build(f"sqlite:///{tmp / 'r.db'}", mixed=True)
    out = tmp / "report.html"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", report_db.SWEEP, "--db", url, "--out", str(out)]) == 0
    with contextlib.redirect_stdout(io.StringIO()) as said:
        assert main(["leaderboard", report_db.SWEEP, "--db", url, "--format", "json"]) == 0
    return out, json.loads(said.getvalue())


# a desktop and a laptop window (the dashboard's browser pass uses the same two)
SIZES = [(1600, 1200), (1280, 800)]


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_report_opens_from_disk_and_every_chart_renders(
        built: tuple[Path, dict], width: int, height: int) -> None:
    out, board = built
    with screenshot.browser() as b:
        page = b.new_page(viewport={"width": width, "height": height})
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("console", lambda m: problems.append(f"console: {m.text}")
                if m.type == "error" else None)
        page.on("request", lambda r: problems.append(f"request: {r.url}")
                if not r.url.startswith(("file:", "data:", "blob:")) else None)
        page.goto(out.as_uri())
        page.wait_for_function(DRAWN, timeout=60_000)
        state = page.evaluate("window.gatesweepReport")
        charts = page.evaluate(
            f"[...document.querySelectorAll('div.chart')].map(d => [d.id, d.dataset.rendered, "
            f"d.querySelectorAll('{MARKS}').length, d.getBoundingClientRect().height])")
        rows = page.evaluate("[...document.querySelectorAll('#leaderboard-table tbody tr')].map("
                             "tr => [...tr.children].map(td => td.textContent))")
        first = page.evaluate("document.querySelector('#answers p').textContent")
        # at either size nothing is cut off: the page never scrolls sideways (a wide table
        # scrolls in its own box) and no chart or legend reaches past the viewport
        overflow = page.evaluate(
            "[document.scrollingElement.scrollWidth, window.innerWidth, Math.max(...[...document"
            ".querySelectorAll('div.chart svg')].map(e => e.getBoundingClientRect().right))]")
        page.emulate_media(media="print")
        breaks = page.evaluate("[...document.querySelectorAll('section')].map(s => "
                               "getComputedStyle(s).breakBefore)")
        mixed = page.evaluate("document.querySelector('#mixed').textContent")
        flagged = page.evaluate("[...document.querySelectorAll('#provenance-table th.flag')].map("
                                "th => th.textContent)")
    assert not problems, problems
    assert state["errors"] == [] and state["rendered"] == state["charts"] == 5
    for chart_id, rendered, marks, height in charts:
        assert rendered == "1" and marks > 20 and height > 100, (chart_id, marks, height)
    assert {c[0] for c in charts} == {"leaderboard-chart", "stability-chart", "scaling-chart",
                                      "curve-train-loss", "curve-val-loss"}
    assert overflow[0] <= overflow[1] and overflow[2] <= overflow[1], overflow
    assert breaks[0] != "page" and set(breaks[1:]) == {"page"}, breaks  # a page per section
    # the numbers are the CLI's: the answers first
    assert first == board["summary"].splitlines()[0]
    assert mixed == board["summary"].splitlines()[-1]
    assert mixed.startswith("Mixed provenance: the 57 runs compared")
    assert flagged == ["code", "torch"]
    assert len(rows) == len(board["rows"])
    for got, want in zip(rows, board["rows"], strict=True):
        cell = dict(zip(content.BOARD_COLUMNS, got, strict=True))
        assert (cell["rank"], cell["n"]) == (str(want["rank"]), str(want["n"]))
        assert cell["mean ± std"] == fmt_mean_std(want["mean"], want["std"])
        if not want["is_baseline"]:
            assert cell[DELTA_PCT] == fmt_delta_ci(want["delta_pct"], want["ci_low_pct"],
                                                   want["ci_high_pct"])
