"""The report as one self-contained HTML file: text and tables as HTML (every name escaped,
control characters and bidi overrides shown as visible ``\\xNN`` / ``\\u202e``: a DB string
holding U+202E reordered the text around it), each chart's Vega-Lite spec as inline JSON drawn
by the inlined Vega bundle (dashboard/report/vega.py), its strings made visible the same way.
Opens from disk with no server and no network. Each chart's element gets ``data-rendered="1"``
once drawn (``"error"`` and the message if it could not be), and ``window.gatesweepReport``
counts both, for the browser test."""

from __future__ import annotations

import json
import re
from html import escape

from contract.textout import json_finite, terminal
from dashboard.report.model import Chart, Report, Section, Table
from dashboard.report.vega import visible

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 1100px; margin: 2em auto; color: #222;
       padding: 0 1em; }
h1 { margin-bottom: .2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; }
.meta { color: #666; } .flag { background: #fff3cd; }
p.flag, div.flag { border-left: 4px solid #e0a800; padding: .5em .8em; }
table.data { border-collapse: collapse; font-size: 13px; margin: .6em 0; }
table.data th, table.data td { border: 1px solid #ddd; padding: 3px 7px; text-align: left;
                               vertical-align: top; }
table.data th { background: #f4f4f4; } th.flag, td.flag { background: #fff3cd; }
figure { margin: 1.2em 0; } figcaption { color: #444; font-size: 13px; margin-bottom: .3em; }
.caption { color: #555; font-size: 13px; } nav a { margin-right: .8em; }
/* a table wider than the page scrolls inside its own box (1280 px: nothing is cut off) */
.wide { max-width: 100%; overflow-x: auto; }
@media print {
  /* one page per section, the answers first; nothing scrolls on paper, so tables shrink */
  body { max-width: none; margin: 0; padding: 0; font-size: 10pt; }
  nav, .noprint { display: none; }
  section { break-before: page; } section:first-of-type { break-before: auto; }
  .wide { overflow: visible; }
  table.data { font-size: 8pt; } table.data td { word-break: break-word; }
  tr, figure, .flag { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""

RENDER = """
window.gatesweepReport = {charts: 0, rendered: 0, errors: []};
for (const el of document.querySelectorAll('script[type="application/json"][data-chart]')) {
  const target = document.getElementById(el.dataset.chart);
  window.gatesweepReport.charts += 1;
  vegaEmbed(target, JSON.parse(el.textContent), {actions: false, renderer: "svg"})
    .then(() => { target.dataset.rendered = "1"; window.gatesweepReport.rendered += 1; })
    .catch((err) => { target.dataset.rendered = "error"; target.textContent =
      "this chart could not be drawn: " + err; window.gatesweepReport.errors.push(String(err)); });
}
"""


def _json_safe(text: str) -> str:
    """JSON inside <script>: "<\\/" is the same JSON string as "</", and no "</script" or
    "<!--" can then close or confuse the element."""
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def _js_safe(text: str) -> str:
    """JavaScript inside <script>: only "</script" ends the element (a regex literal such as
    /</g must stay as it is); in a string or a regex "<\\/script" means the same."""
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


def _text(value: object) -> str:
    """Any text in the page: control characters visible (textout.terminal), then escaped."""
    return escape(terminal(value))


def table_html(t: Table) -> str:
    cols = t.frame.columns
    cls = {c: ' class="flag"' if c in t.flagged else "" for c in cols}
    head = "".join(f"<th{cls[c]}>{_text(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td{cls[c]}>{_text('' if v is None else v)}</td>"
                                    for c, v in zip(cols, row, strict=True)) + "</tr>"
                   for row in t.frame.iter_rows())
    table = (f'<div class="wide"><table class="data" id="{_text(t.id)}"><thead><tr>{head}'
             f"</tr></thead><tbody>{body}</tbody></table></div>")
    caption = f'<p class="caption">{_text(t.caption)}</p>' if t.caption else ""
    if t.collapsed:
        return (f"<details><summary>{_text(t.caption or t.id)} ({t.frame.height} rows)"
                f"</summary>{table}</details>")
    return caption + table


def chart_html(c: Chart) -> str:
    spec = _json_safe(json.dumps(json_finite(visible(c.spec)), allow_nan=False))
    return (f'<figure><figcaption>{_text(c.title)}</figcaption>'
            f'<div class="chart" id="{_text(c.id)}"></div></figure>'
            f'<script type="application/json" data-chart="{_text(c.id)}">{spec}</script>')


def section_html(s: Section) -> str:
    parts = [f'<section id="{_text(s.id)}"><h2>{_text(s.title)}</h2>']
    parts += [f"<p>{_text(text)}</p>" for text in s.sentences]
    for b in s.blocks:
        parts.append(table_html(b) if isinstance(b, Table) else chart_html(b))
    return "".join(parts) + "</section>"


def render(report: Report, javascript: str) -> str:
    """The whole document; ``javascript``: the Vega bundle (vega.javascript_bundle())."""
    nav = "".join(f'<a href="#{_text(s.id)}">{_text(s.title)}</a>' for s in report.sections)
    flags = "".join(f'<p class="flag" id="mixed">{_text(f)}</p>' for f in report.flags)
    desc = f"<p>{_text(report.description)}</p>" if report.description else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>gatesweep report: {_text(report.sweep)}</title><style>{STYLE}</style>"
        f"<script>{_js_safe(javascript)}</script></head><body>"
        f"<h1>Sweep {_text(report.sweep)}</h1>{desc}"
        f'<p class="meta">{_text(report.counts)}. Written {_text(report.generated)} from '
        f"{_text(report.db)} by gatesweep.</p>{flags}<nav>{nav}</nav>"
        + "".join(section_html(s) for s in report.sections)
        + f"<script>{RENDER}</script></body></html>\n")
