"""Serve the dashboard and capture pages in headless Chromium (Debian's, via Playwright).

Used by tests/e2e/test_dashboard_browser.py and for the README screenshot of a real sweep:

    python -m dashboard.screenshot --db sqlite:///results.db --page "Ablation tables" \
        --out docs/img/ablation.png [--sweep gates-toy] [--wait-for "Paper PPL"]

Never runs `playwright install`: it drives the system browser at CHROMIUM (default
/usr/bin/chromium) with flags that keep it off the network.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from pathlib import Path

APP = Path(__file__).with_name("app.py")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


_RUN_OVER_JS = "() => !document.querySelector('[data-testid=stStatusWidget]')"
_DRAWN_JS = "() => !document.querySelector('[data-testid=stSkeleton]')"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(db_url: str, port: int | None = None, timeout_s: float = 60) -> Iterator[str]:
    """`streamlit run dashboard/app.py` on 127.0.0.1:<free port>; yields the base URL."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port),
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
           "--client.toolbarMode", "minimal"]
    log = tempfile.NamedTemporaryFile(prefix="dashboard-", suffix=".log", delete=False)
    proc = subprocess.Popen(cmd, env={**os.environ, "GATESWEEP_DB": db_url}, stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(base, proc, timeout_s, log.name)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait_healthy(base: str, proc: subprocess.Popen, timeout_s: float, log: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}; see {log}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        time.sleep(0.3)
    raise TimeoutError(f"streamlit did not answer {base}/_stcore/health in {timeout_s} s; "
                       f"see {log}")


def page_url(base: str, page: str, sweep: str | None = None) -> str:
    params = {"page": page, **({"sweep": sweep} if sweep else {})}
    return f"{base}/?{urllib.parse.urlencode(params)}"


@contextlib.contextmanager
def browser() -> Iterator[object]:
    """A Playwright Chromium browser (the system binary), closed on exit."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise FileNotFoundError(f"no Chromium at {CHROMIUM} (apt-get install chromium, or set "
                                "CHROMIUM=/path/to/chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@dataclass(frozen=True)
class Shot:
    """What a captured page shows: its visible text and, per chart canvas, its size, the
    pixels drawn (not transparent, not white) and the pixels of each asked-for colour."""

    text: str
    charts: list[dict]


# Per chart: {w, h, ink: data marks drawn, hits: [marks of each asked-for colour]}. Streamlit's
# vega-embed draws SVG: data marks live in `g.role-mark` groups (axes, legends and titles in
# others), each mark a path/line/rect whose stroke or fill is its colour.
_CHARTS_JS = """(colors) => {
  const want = colors.map(c => c.toLowerCase());
  return Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]')).map(el => {
    const svg = el.querySelector('svg.marks') || el.querySelector('svg');
    if (!svg) return {w: 0, h: 0, ink: 0, hits: want.map(() => 0)};
    const marks = Array.from(svg.querySelectorAll('g.role-mark path, g.role-mark line, '
                                                  + 'g.role-mark rect'))
      .filter(m => m.tagName !== 'path' || (m.getAttribute('d') || '').length > 2);
    const hits = want.map(c => marks.filter(m =>
      [m.getAttribute('stroke'), m.getAttribute('fill')].some(
        v => (v || '').toLowerCase() === c)).length);
    const box = svg.getBoundingClientRect();
    return {w: Math.round(box.width), h: Math.round(box.height), ink: marks.length, hits: hits};
  });
}"""
_CHARTS_DRAWN_JS = """() => Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]'))
  .every(el => el.querySelector('svg'))"""


_COUNT_JS = ("() => document.querySelectorAll('[data-testid=stElementContainer]').length"
             " + (document.querySelector('[data-testid=stStatusWidget]') ? 100000 : 0)")


def _wait_settled(page: Any, timeout_s: float, quiet_s: float = 1.5) -> None:
    """Until the number of page elements has not changed for ``quiet_s`` (the status widget
    can appear late, after the first elements are drawn)."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        n = page.evaluate(_COUNT_JS)
        if n != last:
            last, since = n, time.monotonic()
        elif n < 100000 and time.monotonic() - since >= quiet_s:
            return
        page.wait_for_timeout(250)


def capture(b: object, url: str, wait_for: str, out: Path | None, timeout_ms: int = 45_000,
            colors: Sequence[str] = (), height: int = 1000) -> Shot:
    """Open ``url``, wait until ``wait_for`` is visible, screenshot to ``out``; returns the
    page's visible text (the main area) and its charts' pixel counts."""
    page = b.new_page(viewport={"width": 1500, "height": height})  # type: ignore[attr-defined]
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_text(wait_for, exact=False).first.wait_for(state="visible",
                                                               timeout=timeout_ms)
        page.wait_for_function(_RUN_OVER_JS, timeout=timeout_ms)  # the script run is over
        _wait_settled(page, timeout_ms / 1000)
        # lazily loaded widgets/charts replace their skeletons; best effort, charts below the
        # fold may keep theirs
        with contextlib.suppress(Exception):
            page.wait_for_function(_DRAWN_JS, timeout=20_000)
        with contextlib.suppress(Exception):
            page.wait_for_function(_CHARTS_DRAWN_JS, timeout=20_000)
        page.wait_for_timeout(800)  # vega draws a frame after insertion
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
        text = page.locator("section.stMain, [data-testid=stMain]").first.inner_text()
        return Shot(text, page.evaluate(_CHARTS_JS, list(colors)))
    finally:
        page.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="[default: $GATESWEEP_DB or sqlite:///results.db]")
    ap.add_argument("--page", default="Ablation tables")
    ap.add_argument("--sweep", default=None)
    ap.add_argument("--wait-for", default="Method", help="text that shows the page is drawn")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import results_db

    with serve(args.db or results_db.default_url()) as base, browser() as b:
        capture(b, page_url(base, args.page, args.sweep), args.wait_for, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
