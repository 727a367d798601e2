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
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from contract.textout import (
    FORMULA_RE,
    csv_cell,
    json_finite,
    latex_table,
    markdown_table,
    terminal,
)

if TYPE_CHECKING:
    import polars as pl

FORMATS = ("table", "csv", "json", "markdown", "latex")
# Rich styles by verdict (the dashboard colours by the same words).
VERDICT_STYLE = {"better": "green", "worse": "red", "within noise": "dim", "baseline": "bold"}


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


def render(out: Console, frame: pl.DataFrame, fmt: str, *, title: str = "", summary: str = "",
           columns: list[str] | None = None) -> None:
    """Print ``frame`` in ``fmt``; ``columns`` (human formats only) picks what is shown."""
    shown = [c for c in (columns or frame.columns) if c in frame.columns]
    if fmt == "csv":
        if summary:
            print(terminal(summary), file=sys.stderr)
        write_stdout(csv_text(frame))
    elif fmt == "json":
        doc = {"title": title, "summary": summary, "rows": frame.to_dicts()}
        sys.stdout.write(json_text(doc))
    elif fmt == "markdown":
        sys.stdout.write(markdown(frame, shown, title, summary))
    elif fmt == "latex":
        sys.stdout.write(latex(frame, shown, title, summary))
    else:
        if summary:
            out.print(summary)
        out.print(rich_table(frame, shown, title))


def write_stdout(text: str) -> None:
    """Machine output (CSV) as it is into a pipe or file; on a terminal, control characters
    shown as ``\\xNN`` (an ESC sequence in a stored name must not reach the terminal)."""
    sys.stdout.write(terminal(text) if sys.stdout.isatty() else text)


def rich_table(frame: pl.DataFrame, columns: list[str], title: str = "") -> Table:
    t = Table(title=title or None)
    for c in columns:
        t.add_column(c, justify="left" if frame.schema[c].is_numeric() is False else "right")
    verdicts = frame["verdict"].to_list() if "verdict" in frame.columns else None
    for i, row in enumerate(frame.select(columns).iter_rows()):
        style = VERDICT_STYLE.get(str(verdicts[i])) if verdicts else None
        t.add_row(*(cell(v) for v in row), style=style)
    return t


def markdown(frame: pl.DataFrame, columns: list[str], title: str = "", summary: str = "") -> str:
    """Markdown table of the human cells (contract.textout escapes every name and cell)."""
    return markdown_table(columns, ([cell(v) for v in row]
                                    for row in frame.select(columns).iter_rows()),
                          [bool(frame.schema[c].is_numeric()) for c in columns], title, summary)


def latex(frame: pl.DataFrame, columns: list[str], title: str = "", summary: str = "") -> str:
    """A booktabs tabular; title and summary as one-line ``%`` comments above it."""
    align = "".join("r" if frame.schema[c].is_numeric() else "l" for c in columns)
    return latex_table(columns, ([cell(v) for v in row]
                                 for row in frame.select(columns).iter_rows()),
                       align, comments=(title, summary))


def csv_text(frame: pl.DataFrame) -> str:
    """CSV at full precision: nested columns (lists, structs) as JSON text, which CSV can hold
    (polars refuses them); text cells that a spreadsheet would run as a formula (``=...``,
    ``+``, ``-``, ``@``) get a leading ``'`` (the rule of contract.textout.csv_cell)."""
    import polars as pl


    fixes = []
    for name, dtype in frame.schema.items():
        if dtype.is_nested():
            fixes.append(pl.col(name).map_elements(
                lambda v: json.dumps(_plain(v), default=_json_value), return_dtype=pl.Utf8,
                skip_nulls=True))
        elif dtype in (pl.Utf8, pl.Categorical) or isinstance(dtype, pl.Enum):
            text = pl.col(name).cast(pl.Utf8)  # vectorised csv_cell: one regex over the column
            fixes.append(pl.when(text.str.contains(FORMULA_RE)).then(pl.lit("'") + text)
                         .otherwise(text).alias(name))
    out = frame.with_columns(fixes) if fixes else frame
    names = {c: csv_cell(c) for c in out.columns}  # a header cell is a cell too
    if any(k != v for k, v in names.items()) and len(set(names.values())) == len(names):
        out = out.rename(names)
    return out.write_csv()


def _plain(v: Any) -> Any:
    """A polars nested value (list/Series/dict) as JSON-able Python, NaN/inf as null."""
    if hasattr(v, "to_list"):
        v = v.to_list()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return json_finite(v)


def json_text(doc: Any) -> str:
    """``doc`` as JSON text (RFC 8259 has no NaN or Infinity: every non-finite float, at any
    depth, is null like a missing value; ``query --format json`` wrote ``Infinity``)."""
    return json.dumps(json_finite(doc), default=_json_value, indent=1, allow_nan=False) + "\n"


def _json_value(v: Any) -> Any:
    return str(v)  # datetimes and the like
