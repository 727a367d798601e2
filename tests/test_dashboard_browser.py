"""The running app (`streamlit run`, 127.0.0.1, free port) in headless Chromium via Playwright.

Checks the visible text of the leaderboard and the ablation table for the sample sweep written
through results_db's writer API, and saves screenshots to a temp dir -- and to
$GATESWEEP_SCREENSHOT_DIR when set (e.g. docs/img/). Skipped where /usr/bin/chromium (or
$CHROMIUM) or playwright is missing; `make system-deps` installs Chromium for CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import results_db
from dashboard import sample, screenshot

pytestmark = pytest.mark.browser

if not Path(screenshot.CHROMIUM).exists():
    pytest.skip(f"no Chromium at {screenshot.CHROMIUM}: apt-get install chromium "
                "(make system-deps)", allow_module_level=True)
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip: .[dev])")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'results.db'}"
    db = results_db.open(url)
    sample.fill(db)
    db.close()
    with screenshot.serve(url) as base, screenshot.browser() as b:
        yield base, b


def _shot_paths(tmp_path: Path, name: str) -> list[Path]:
    paths = [tmp_path / name]
    if os.environ.get("GATESWEEP_SCREENSHOT_DIR"):
        paths.append(Path(os.environ["GATESWEEP_SCREENSHOT_DIR"]) / name)
    return paths


def _capture(served, tmp_path: Path, page: str, wait_for: str, name: str) -> str:
    base, b = served
    first, *more = _shot_paths(tmp_path, name)
    text = screenshot.capture(b, screenshot.page_url(base, page, "demo"), wait_for, first)
    assert first.stat().st_size > 10_000  # a real rendered PNG, not an empty page
    for extra in more:
        extra.parent.mkdir(parents=True, exist_ok=True)
        extra.write_bytes(first.read_bytes())
    return text


def test_leaderboard_in_browser(served, tmp_path: Path) -> None:
    text = _capture(served, tmp_path, "Leaderboard", "9.100 ± 0.100", "dashboard-leaderboard.png")
    assert "Leaderboard — demo" in text
    # the ranking, top to bottom, as the user sees it
    order = [text.index(v) for v in ("sdpa_elementwise", "sdpa_headwise", "value_elementwise",
                                     "baseline (baseline)", "sdpa_ns_sigmoid")]
    assert order == sorted(order)
    for cell in ("-1.100 (-10.8%)", "10.200 ± 0.200", "9.900 ± 0.141"):
        assert cell in text


def test_ablation_table_in_browser(served, tmp_path: Path) -> None:
    text = _capture(served, tmp_path, "Ablation tables", "SDPA Headwise G1",
                    "dashboard-ablation.png")
    for cell in ("Paper PPL", "SDPA Elementwise G1", "v Elementwise G2", "n×q×dk", "5.761",
                 "9.100 ± 0.100", "NS-sigmoid"):
        assert cell in text, cell
