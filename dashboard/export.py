"""Table export: CSV (numbers), Markdown and LaTeX (the displayed strings), no extra packages.

The writers and escapes are contract.textout's (Markdown, LaTeX) and
orchestrator.cli.frame_format.csv_text (CSV): the CLI's ``--format`` and these downloads escape
names the same way.
"""

from __future__ import annotations

import polars as pl

from contract.textout import latex_table, markdown_table
from orchestrator.cli.frame_format import csv_text


def to_csv(frame: pl.DataFrame) -> str:
    return csv_text(frame)


def _cells(frame: pl.DataFrame) -> list[list[str]]:
    return [["" if v is None else str(v) for v in row] for row in frame.iter_rows()]


def to_markdown(frame: pl.DataFrame) -> str:
    """A GitHub-flavoured Markdown table; cells are escaped (contract.textout.md_inline): a
    variant name with '|', '*', backticks or a line break stays one literal cell."""
    return markdown_table(frame.columns, _cells(frame))


def to_latex(frame: pl.DataFrame, caption: str = "") -> str:
    """A booktabs ``table`` (needs ``\\usepackage{booktabs}``): first column left, rest centred."""
    spec = "l" + "c" * (len(frame.columns) - 1)
    return latex_table(frame.columns, _cells(frame), spec, caption=caption)
