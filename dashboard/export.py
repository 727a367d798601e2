"""Table export: CSV (numbers), Markdown and LaTeX (the displayed strings), no extra packages."""

from __future__ import annotations

import polars as pl

from dashboard.mdtext import md

_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}
_LATEX_UNICODE = {"±": r"$\pm$", "×": r"$\times$", "–": "--", "Δ": r"$\Delta$"}


def to_csv(frame: pl.DataFrame) -> str:
    return frame.write_csv()


def _cells(frame: pl.DataFrame) -> list[list[str]]:
    return [["" if v is None else str(v) for v in row] for row in frame.iter_rows()]


def to_markdown(frame: pl.DataFrame) -> str:
    """A GitHub-flavoured Markdown table; cells are escaped (dashboard/mdtext.md): a variant
    name with '|', '*', backticks or a line break stays one literal cell."""
    head = "| " + " | ".join(md(c) for c in frame.columns) + " |"
    rule = "| " + " | ".join("---" for _ in frame.columns) + " |"
    body = ["| " + " | ".join(md(v) for v in row) + " |" for row in _cells(frame)]
    return "\n".join([head, rule, *body]) + "\n"


def latex_escape(text: str) -> str:
    out = "".join(_LATEX_ESCAPES.get(ch, ch) for ch in text)
    for uni, tex in _LATEX_UNICODE.items():
        out = out.replace(uni, tex)
    return out


def to_latex(frame: pl.DataFrame, caption: str = "") -> str:
    """A booktabs ``table`` (needs ``\\usepackage{booktabs}``): first column left, rest centred."""
    spec = "l" + "c" * (len(frame.columns) - 1)
    lines = [r"\begin{table}[t]", r"\centering"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    lines += [rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
              " & ".join(latex_escape(c) for c in frame.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(latex_escape(v) for v in row) + r" \\" for row in _cells(frame)]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"
