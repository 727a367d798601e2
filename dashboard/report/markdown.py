"""The report as Markdown (a paper appendix, a README): the same sections, tables as
GitHub-flavoured Markdown (contract/textout.py escapes every cell), each chart an SVG file
beside it (drawn by the same Vega libraries, dashboard/report/vega.py), linked relatively and
URL-quoted (a folder named "my report (v2)_files" ended the link at its space)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

from contract.textout import markdown_table, md_inline
from dashboard.report.model import Chart, Report, Table


def table_md(t: Table) -> str:
    flag = [f"{c} ⚠" if c in t.flagged else c for c in t.frame.columns]
    rows = ([("" if v is None else str(v)) for v in row] for row in t.frame.iter_rows())
    caption = f"*{md_inline(t.caption)}*\n\n" if t.caption else ""
    return caption + markdown_table(flag, rows)


def figure_link(figures_dir: str, name: str) -> str:
    """The link to figure ``name`` in ``figures_dir`` (a relative POSIX path): each part
    URL-quoted, so spaces, parentheses and the like stay inside the link."""
    return urllib.parse.quote(f"{figures_dir}/{name}", safe="/")


def render(report: Report, figures_dir: str, figure: Callable[[Chart], str]) -> str:
    """The document; ``figure(chart)`` writes the chart's SVG and returns its file name, which
    is linked as ``figures_dir/name`` (figure_link)."""
    out = [f"# Sweep {md_inline(report.sweep)}", ""]
    if report.description:
        out += [md_inline(report.description), ""]
    out += [f"*{md_inline(report.counts)}. Written {md_inline(report.generated)} from "
            f"{md_inline(report.db)} by gatesweep.*", ""]
    out += [f"> **{md_inline(f)}**\n" for f in report.flags]
    for s in report.sections:
        out += [f"## {md_inline(s.title)}", ""]
        out += [md_inline(text) + "\n" for text in s.sentences]
        for b in s.blocks:
            if isinstance(b, Table):
                out.append(table_md(b))
            else:
                name = figure(b)
                out += [f"![{md_inline(b.title)}]({figure_link(figures_dir, name)})", ""]
    return "\n".join(out) + "\n"
