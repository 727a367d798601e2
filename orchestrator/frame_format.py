"""Print a polars frame as a rich table, CSV, JSON, Markdown or LaTeX (read-only CLI output).

Formatting only: the numbers come from results_db as they are. Machine formats (csv, json)
keep every column at full precision; human formats (table, markdown, latex) show 4
significant digits. A one-sentence summary goes above a human table, into JSON as
``"summary"``, and to stderr for CSV (so the CSV stays a plain table).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

FORMATS = ("table", "csv", "json", "markdown", "latex")
# Rich styles by verdict (the dashboard colours by the same words).
VERDICT_STYLE = {"better": "green", "worse": "red", "within noise": "dim", "baseline": "bold"}
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
          "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
          "^": r"\textasciicircum{}"}


def cell(v: Any) -> str:
    """A value as a human reads it: '' for null, 4 significant digits for floats."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        from contract.errors import UserError

        raise UserError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    return fmt


def render(out: Console, frame: Any, fmt: str, *, title: str = "", summary: str = "",
           columns: list[str] | None = None) -> None:
    """Print ``frame`` in ``fmt``; ``columns`` (human formats only) picks what is shown."""
    shown = [c for c in (columns or frame.columns) if c in frame.columns]
    if fmt == "csv":
        if summary:
            print(summary, file=sys.stderr)
        sys.stdout.write(frame.write_csv())
    elif fmt == "json":
        rows = [{k: _finite(v) for k, v in r.items()} for r in frame.to_dicts()]
        doc = {"title": title, "summary": summary, "rows": rows}
        sys.stdout.write(json.dumps(doc, default=_json_value, indent=1) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(markdown(frame, shown, title, summary))
    elif fmt == "latex":
        sys.stdout.write(latex(frame, shown, title, summary))
    else:
        if summary:
            out.print(summary)
        out.print(rich_table(frame, shown, title))


def rich_table(frame: Any, columns: list[str], title: str = "") -> Table:
    t = Table(title=title or None)
    for c in columns:
        t.add_column(c, justify="left" if frame.schema[c].is_numeric() is False else "right")
    verdicts = frame["verdict"].to_list() if "verdict" in frame.columns else None
    for i, row in enumerate(frame.select(columns).iter_rows()):
        style = VERDICT_STYLE.get(str(verdicts[i])) if verdicts else None
        t.add_row(*(cell(v) for v in row), style=style)
    return t


def markdown(frame: Any, columns: list[str], title: str = "", summary: str = "") -> str:
    esc = lambda s: s.replace("|", r"\|")  # noqa: E731
    lines = [f"### {title}", ""] if title else []
    lines += [summary, ""] if summary else []
    lines.append("| " + " | ".join(esc(c) for c in columns) + " |")
    lines.append("|" + "|".join("---:" if frame.schema[c].is_numeric() else "---"
                                for c in columns) + "|")
    for row in frame.select(columns).iter_rows():
        lines.append("| " + " | ".join(esc(cell(v)) for v in row) + " |")
    return "\n".join(lines) + "\n"


def latex(frame: Any, columns: list[str], title: str = "", summary: str = "") -> str:
    esc = lambda s: "".join(_LATEX.get(ch, ch) for ch in s)  # noqa: E731
    align = "".join("r" if frame.schema[c].is_numeric() else "l" for c in columns)
    lines = [f"% {title}"] if title else []
    lines += [f"% {summary}"] if summary else []
    lines += [f"\\begin{{tabular}}{{{align}}}", "\\toprule",
              " & ".join(esc(c) for c in columns) + " \\\\", "\\midrule"]
    for row in frame.select(columns).iter_rows():
        lines.append(" & ".join(esc(cell(v)) for v in row) + " \\\\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def _finite(v: Any) -> Any:
    """NaN/inf are not JSON: null, like a missing value."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def _json_value(v: Any) -> Any:
    return str(v)  # datetimes and the like
