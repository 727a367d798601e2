"""Serve the dashboard and capture pages in headless Chromium (Debian's, via Playwright).

Used by tests/e2e/test_dashboard_browser.py and for the README screenshot of a real sweep:

    python -m tests.support.screenshot --db sqlite:///results.db --sweep gates-toy \
        --page Leaderboard --out docs/img/leaderboard.png --page Curves --out docs/img/curves.png

Never runs `playwright install`: it drives the system browser at CHROMIUM (default
/usr/bin/chromium) with flags that keep it off the network.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


_RUN_OVER_JS = "() => !document.querySelector('[data-testid=stStatusWidget]')"
_DRAWN_JS = "() => !document.querySelector('[data-testid=stSkeleton]')"


@contextlib.contextmanager
def serve(db_url: str, port: int | None = None, timeout_s: float = 60,
          idle_s: float | None = None) -> Iterator[str]:
    """`streamlit run dashboard/app.py` on 127.0.0.1:<free port>; yields the base URL. With
    ``idle_s`` an idle page rechecks the DB that often (GATESWEEP_DASHBOARD_IDLE_S)."""
    port = port or free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port),
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
           "--client.toolbarMode", "minimal"]
    log = tempfile.NamedTemporaryFile(prefix="dashboard-", suffix=".log", delete=False)
    env = {**os.environ, "GATESWEEP_DB": db_url}
    if idle_s is not None:
        env["GATESWEEP_DASHBOARD_IDLE_S"] = str(idle_s)
    proc = subprocess.Popen(cmd, env=env, stdout=log,
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
    detail: list[dict] = field(default_factory=list)  # per chart: _DETAIL_JS
    tables: list[int] = field(default_factory=list)  # each dataframe's drawn height, px


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
# What a chart *says*, read off its SVG (the dashboard's browser checks): per chart the axis titles,
# the legend labels and how many of them fall outside the chart (clipped), the end point of
# each line in data units (its last vertex mapped through the y axis's tick labels; linear
# axes only), its opacity and series, the text marks, the size of each area mark, and
# {variant: [colours]} of the marks whose description names a variant. Vega-Lite gives every
# mark an aria-label "field: value; ..." (the encoded fields), which is where series/variant/
# state are read from.
_DETAIL_JS = """() => {
  const num = t => parseFloat((t || '').replace(/\u2212/g, '-').replace(/,/g, ''));
  const field = (label, key) => {
    const m = (label || '').split('; ').find(p => p.startsWith(key + ': '));
    return m === undefined ? null : m.slice(key.length + 2);
  };
  const inside = (b, o) => b.left >= o.left - 1 && b.right <= o.right + 1
    && b.top >= o.top - 1 && b.bottom <= o.bottom + 1;
  return Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]')).map(el => {
    const svg = el.querySelector('svg');
    if (!svg) return null;
    const box = svg.getBoundingClientRect();
    const axes = Array.from(svg.querySelectorAll('g.role-axis')).map(a => {
      const labels = Array.from(a.querySelectorAll('g.role-axis-label text')).map(t => {
        const b = t.getBoundingClientRect();
        return {v: num(t.textContent), x: b.left + b.width / 2, y: b.top + b.height / 2};
      }).filter(l => isFinite(l.v));
      const title = a.querySelector('g.role-axis-title text');
      return {labels: labels, title: title ? title.textContent : null};
    });
    // the y axis: the one whose labels differ in y; value = a + b * screen y (two labels)
    const yaxis = axes.find(a => a.labels.length >= 2
                            && Math.abs(a.labels[0].y - a.labels[1].y) > 1);
    const toY = sy => {
      if (!yaxis) return null;
      const [p, q] = [yaxis.labels[0], yaxis.labels[yaxis.labels.length - 1]];
      return p.v + (q.v - p.v) * (sy - p.y) / (q.y - p.y);
    };
    const lines = Array.from(svg.querySelectorAll('g.mark-line.role-mark path')).map(p => {
      let end = null;  // a path with no segment (one point, nothing in view) has no end
      try {
        const pt = p.getPointAtLength(p.getTotalLength()).matrixTransform(p.getScreenCTM());
        end = toY(pt.y);
      } catch (e) { end = null; }
      const label = p.getAttribute('aria-label') || '';
      return {series: field(label, 'series') || field(label, 'row'),
              variant: field(label, 'variant'), end: end,
              opacity: parseFloat(p.getAttribute('stroke-opacity') || p.getAttribute('opacity')
                                  || getComputedStyle(p).opacity || '1'),
              stroke: p.getAttribute('stroke'), dash: p.getAttribute('stroke-dasharray')};
    });
    const legend = Array.from(svg.querySelectorAll('g.role-legend-label text'));
    const colours = {};
    svg.querySelectorAll('g.role-mark [aria-label]').forEach(m => {
      const v = field(m.getAttribute('aria-label'), 'variant');
      const c = m.getAttribute('stroke') || m.getAttribute('fill');
      if (v && c && c !== 'white' && c !== 'transparent') {
        colours[v] = Array.from(new Set([...(colours[v] || []), c.toLowerCase()]));
      }
    });
    return {
      w: Math.round(box.width), h: Math.round(box.height),
      titles: axes.map(a => a.title).filter(t => t),
      legend: legend.map(t => t.textContent),
      legend_clipped: legend.filter(t => !inside(t.getBoundingClientRect(), box)
                                    || t.textContent.endsWith('\u2026'))
        .map(t => { const b = t.getBoundingClientRect();
                    return [t.textContent, Math.round(b.left - box.left), Math.round(b.top -
                    box.top),
                            Math.round(b.right - box.right), Math.round(b.bottom - box.bottom)]; }),
      lines: lines,
      texts: Array.from(svg.querySelectorAll('g.mark-text.role-mark text'))
        .map(t => t.textContent),
      symbols: Array.from(svg.querySelectorAll('g.mark-symbol.role-mark path'))
        .map(p => p.getAttribute('aria-label') || ''),
      areas: Array.from(svg.querySelectorAll('g.mark-area.role-mark path')).map(p => {
        const b = p.getBoundingClientRect();
        return [Math.round(b.width), Math.round(b.height)];
      }),
      colours: colours,
    };
  });
}"""
_TABLES_JS = """() => Array.from(document.querySelectorAll('[data-testid=stDataFrame]'))
  .map(el => Math.round(el.getBoundingClientRect().height))"""
_CHARTS_DRAWN_JS = """() => Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]'))
  .every(el => el.querySelector('svg'))"""


# What must stay the same for a page to count as settled, or -1 while a script run is going
# on: the app's own run state (``data-test-script-state``, set from the server's session
# status, so it is never "notRunning" between an event and the rerun it asks for), no element
# left stale from the run before, no status widget; then the number of elements and, per
# chart, its svg's size and node count (Vega draws a frame after insertion and again when
# its container's width is known)
_STATE_JS = """() => {
  const app = document.querySelector('[data-testid=stApp]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning'
      || document.querySelector('[data-testid=stStatusWidget]')
      || document.querySelector('[data-testid=stElementContainer][data-stale=true]')) return -1;
  const charts = Array.from(document.querySelectorAll('[data-testid=stVegaLiteChart]'))
    .map(el => { const svg = el.querySelector('svg');
                 if (!svg) return 'none';
                 const b = svg.getBoundingClientRect();
                 return `${Math.round(b.width)}x${Math.round(b.height)}:`
                   + svg.getElementsByTagName('*').length; });
  return document.querySelectorAll('[data-testid=stElementContainer]').length + '|'
    + charts.join(',');
}"""


def _wait_settled(page: Any, timeout_s: float, quiet_s: float = 0.5) -> None:
    """Until no script run is going on and the page's elements and charts (_STATE_JS) have
    not changed for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        state = page.evaluate(_STATE_JS)
        if state != last:
            last, since = state, time.monotonic()
        elif state != -1 and time.monotonic() - since >= quiet_s:
            return
        page.wait_for_timeout(100)


def settle(page: Any, timeout_ms: int = 45_000) -> None:
    """Until the script run is over and the page's elements and charts stopped changing (a
    rerun replaces elements after the run: an event sent before then can land on an old
    one)."""
    page.wait_for_function(_RUN_OVER_JS, timeout=timeout_ms)
    _wait_settled(page, timeout_ms / 1000)


def open_settled(page: Any, url: str, wait_for: str, timeout_ms: int = 45_000) -> None:
    """Open ``url`` in ``page`` and wait until ``wait_for`` is visible, the script run is
    over, the page's elements have settled and its charts are drawn."""
    page.goto(url, wait_until="domcontentloaded")
    page.get_by_text(wait_for, exact=False).first.wait_for(state="visible", timeout=timeout_ms)
    settle(page, timeout_ms)
    # lazily loaded widgets/charts replace their skeletons; best effort, charts below the
    # fold may keep theirs
    with contextlib.suppress(Exception):
        page.wait_for_function(_DRAWN_JS, timeout=20_000)
    with contextlib.suppress(Exception):
        page.wait_for_function(_CHARTS_DRAWN_JS, timeout=20_000)
    _wait_settled(page, timeout_ms / 1000)  # vega draws a frame after insertion


# What a page cuts off at its viewport's width: the page scrolling sideways; a chart, a legend
# or an axis/legend label past the viewport or its chart's element (which clips it); a label
# Vega shortened with an ellipsis (its labelLimit); a static table wider than its box
_OVERFLOW_JS = """() => {
  const vw = window.innerWidth, out = [];
  const se = document.scrollingElement;
  if (se.scrollWidth > vw + 1) out.push(`page scrolls sideways: ${se.scrollWidth} > ${vw} px`);
  document.querySelectorAll('[data-testid=stVegaLiteChart]').forEach((el, i) => {
    const svg = el.querySelector('svg');
    if (!svg) return;
    const edge = Math.min(vw, el.getBoundingClientRect().right) + 1;
    const b = svg.getBoundingClientRect();
    if (b.right > edge) out.push(`chart ${i} ends at ${Math.round(b.right)} > ${edge} px`);
    svg.querySelectorAll('g.role-legend').forEach(g => {
      const r = g.getBoundingClientRect();
      if (r.right > edge) out.push(`chart ${i}: a legend ends at ${Math.round(r.right)} px`);
    });
    svg.querySelectorAll('g.role-axis-label text, g.role-legend-label text, g.role-axis text')
      .forEach(t => {
        if (t.textContent.endsWith('\u2026')) out.push(`chart ${i}: '${t.textContent}' cut`);
      });
  });
  document.querySelectorAll('[data-testid=stTable]').forEach((t, i) => {
    if (t.scrollWidth > t.clientWidth + 1) out.push(`table ${i} scrolls sideways`);
  });
  return out;
}"""
# each data grid's column headers drawn in its first screen (Glide's accessible headers)
_GRID_HEADERS_JS = """() => Array.from(document.querySelectorAll('[data-testid=stDataFrame]'))
  .map(g => Array.from(g.querySelectorAll('[role=columnheader]')).map(h => h.textContent))"""


def overflow(page: Any) -> list[str]:
    """What ``page`` cuts off at its width (_OVERFLOW_JS), one line each; [] when nothing."""
    return list(page.evaluate(_OVERFLOW_JS))


def grid_headers(page: Any) -> list[list[str]]:
    """Per data grid on ``page``: the column headers its first screen shows."""
    return list(page.evaluate(_GRID_HEADERS_JS))


def capture(b: object, url: str, wait_for: str, out: Path | None, timeout_ms: int = 45_000,
            colors: Sequence[str] = (), height: int = 1000) -> Shot:
    """Open ``url``, wait until ``wait_for`` is visible, screenshot to ``out``; returns the
    page's visible text (the main area), its charts' pixel counts and details (shot_of)."""
    with captured(b, url, wait_for, out, timeout_ms, colors, height) as (shot, _):
        return shot


@contextlib.contextmanager
def captured(b: object, url: str, wait_for: str, out: Path | None, timeout_ms: int = 45_000,
             colors: Sequence[str] = (), height: int = 1000) -> Iterator[tuple[Shot, Any]]:
    """capture, with the page kept open until the block ends: (its Shot, the page), for
    reading more off the same render."""
    page = b.new_page(viewport={"width": 1500, "height": height})  # type: ignore[attr-defined]
    try:
        open_settled(page, url, wait_for, timeout_ms)
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), full_page=True)
        yield shot_of(page, colors), page
    finally:
        page.close()


def shot_of(page: Any, colors: Sequence[str] = ()) -> Shot:
    """What an open page shows now (text, chart pixels by colour, chart details, tables)."""
    text = page.locator("section.stMain, [data-testid=stMain]").first.inner_text()
    return Shot(text, page.evaluate(_CHARTS_JS, list(colors)),
                [d or {} for d in page.evaluate(_DETAIL_JS)], page.evaluate(_TABLES_JS))


# Text that shows a page is drawn (its first screen), for --wait-for's default
WAIT_FOR = {"Overview": "Live runs", "Leaderboard": "Multiplicity correction",
            "LR stability": "Max stable LR rule", "Ablation tables": "Different scale",
            "Scaling": "Scaling", "Curves": "training loss", "Probes": "Gate score histograms",
            "Run detail": "Attempts", "Explore": "Config diff", "Decide": "Rule"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None, help="[default: $GATESWEEP_DB or sqlite:///results.db]")
    ap.add_argument("--page", action="append", help="repeat with --out for several pages "
                    "(one server) [default: Ablation tables]")
    ap.add_argument("--sweep", default=None)
    ap.add_argument("--wait-for", default=None, help="text that shows the page is drawn "
                    "[default: per page, WAIT_FOR]")
    ap.add_argument("--out", type=Path, action="append", required=True)
    ap.add_argument("--height", type=int, default=1000, help="viewport height, px")
    args = ap.parse_args(argv)
    pages = args.page or ["Ablation tables"]
    if len(pages) != len(args.out):
        ap.error(f"{len(pages)} --page for {len(args.out)} --out: give one --out per page")
    import results_db

    with serve(args.db or results_db.default_url()) as base, browser() as b:
        for page, out in zip(pages, args.out, strict=True):
            capture(b, page_url(base, page, args.sweep),
                    args.wait_for or WAIT_FOR.get(page, page), out, height=args.height)
            print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
