"""Text from users and the DB, made safe for the place it is written to (one owner per escape).

Sweep, variant and run names, error text and anything a DB writer stored are free text: the
orchestrator restricts the names it writes, but every string in a shared results DB can hold
``[/x]`` (rich markup), ESC sequences (terminal control), ``|``/``<b>``/newlines (Markdown),
``%``/``\\``/newlines (LaTeX) or ``=cmd()`` (spreadsheet formulas). Each writer calls one function
here; nothing else spells an escape table. Stdlib only (the contract floor).

- ``terminal``: control characters as visible ``\\xNN`` (line breaks and tabs kept);
- ``md_inline`` / ``markdown_table``: CommonMark-literal text (also what Streamlit shows);
- ``latex`` / ``latex_comment`` / ``latex_table``: TeX-literal text, comments that stay comments;
- ``csv_cell``: a spreadsheet never evaluates a cell as a formula;
- ``clip``: an error that echoes what the user typed stays readable (a 100 KB argument or
  key is shown as its head and tail).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

# C0 controls but tab and newline, DEL, C1 controls, and the bidi overrides/isolates that
# reorder what a terminal shows ("Trojan source").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


CLIP = 1000  # characters of one echoed line: a long path and name fit, a pasted file does not


def clip(text: str, limit: int = CLIP) -> str:
    """``text`` with every line longer than ``limit`` cut in the middle, saying how much was
    left out ("...[99,520 more characters]..."): a 100 KB value a user typed was echoed whole
    in its one error line."""
    out = []
    for line in text.split("\n"):
        if len(line) > limit:
            keep = limit // 2
            line = (f"{line[:keep]}...[{len(line) - 2 * keep:,} more characters]..."
                    f"{line[-keep:]}")
        out.append(line)
    return "\n".join(out)


def _visible(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def terminal(text: object) -> str:
    """``text`` with every control character but line feed and tab shown as ``\\xNN``: an ESC
    sequence stored in the DB is printed, never executed by the terminal."""
    return _CONTROL.sub(_visible, str(text))


def one_line(text: object) -> str:
    """``text`` on one line: every line break (``str.splitlines``: CR, LF, VT, FF, NEL, LS, PS
    ...) a space, other control characters visible."""
    return _CONTROL_ALL.sub(_visible, " ".join(str(text).splitlines()))


# ------------------------------------------------------------------------------ Markdown
# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones that start
# inline markup: emphasis (an underscore between two letters or digits never emphasises, so
# sdpa_elementwise stays as typed), code, links (only "](" or "][" closes one), autolinks and
# HTML, entities, table cells, strikethrough, math and Streamlit's :colour[...] directives.
# Block markers (#, >, -, 1.) only count at the start of a line, where this text never goes.
_MD_ACTIVE = re.compile(r"[\\`*<&|~$:]|\](?=[(\[])|(?<![^\W_])_|_(?![^\W_])")


def md_inline(text: object) -> str:
    """``text`` as literal Markdown inside a line or a table cell: active characters escaped,
    line breaks as spaces, control characters visible."""
    return _MD_ACTIVE.sub(lambda m: "\\" + m.group(0), one_line(text))


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[str]],
                   numeric: Sequence[bool] | None = None, title: str = "",
                   summary: str = "") -> str:
    """A GitHub-flavoured Markdown table of already formatted cells (every cell, header, title
    and summary escaped: one cell per value whatever it holds); ``numeric`` right-aligns."""
    lines = [f"### {md_inline(title)}", ""] if title else []
    lines += [md_inline(summary), ""] if summary else []
    align = numeric or [False] * len(columns)
    lines.append("| " + " | ".join(md_inline(c) for c in columns) + " |")
    lines.append("|" + "|".join("---:" if a else "---" for a in align) + "|")
    lines += ["| " + " | ".join(md_inline(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ LaTeX
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
          "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
          "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}
_LATEX_UNICODE = {"±": r"$\pm$", "×": r"$\times$", "–": "--", "Δ": r"$\Delta$"}


def latex(text: object) -> str:
    """``text`` as literal LaTeX body text: specials escaped, line breaks as spaces, control
    characters (ESC, BEL, NUL ...) dropped (TeX has no glyph for them)."""
    flat = _CONTROL_ALL.sub("", " ".join(str(text).splitlines()))
    out = "".join(_LATEX.get(ch, ch) for ch in flat)
    for uni, tex in _LATEX_UNICODE.items():
        out = out.replace(uni, tex)
    return out


def latex_comment(text: object) -> str:
    """``% text`` that stays one comment line: a line break in ``text`` would end the comment
    and make the rest live LaTeX."""
    return "% " + _CONTROL_ALL.sub("", " ".join(str(text).splitlines()))


def latex_table(columns: Sequence[str], rows: Iterable[Sequence[str]], align: str, *,
                caption: str = "", comments: Sequence[str] = ()) -> str:
    """A booktabs ``tabular`` (``\\usepackage{booktabs}``) of already formatted cells, inside a
    ``table`` float when there is a ``caption``; ``comments`` go above as ``%`` lines."""
    lines = [latex_comment(c) for c in comments if c]
    if caption:
        lines += [r"\begin{table}[t]", r"\centering", rf"\caption{{{latex(caption)}}}"]
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule",
              " & ".join(latex(c) for c in columns) + r" \\", r"\midrule"]
    lines += [" & ".join(latex(v) for v in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ CSV
# A cell starting with one of these is a formula to Excel/LibreOffice/Sheets (OWASP "CSV
# injection"); a leading apostrophe makes it text there and is visible everywhere else.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n")
FORMULA_RE = "^[" + re.escape("".join(_FORMULA_START)) + "]"  # the same rule, for a regex


def csv_cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: ``'`` before a formula-starting character.
    (Numbers are not text cells: a negative number stays a number.)"""
    return "'" + text if text.startswith(_FORMULA_START) else text


def json_finite(v: Any) -> Any:
    """NaN/inf are not JSON (JSON.parse refuses them): null, as a missing value, at any depth of
    dicts, lists and tuples (the CLI's --format json and the report's embedded data)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: json_finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_finite(x) for x in v]
    return v
