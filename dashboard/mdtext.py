"""Text from the DB (variant, run and sweep names, error messages) placed inside Streamlit
markdown (st.markdown, st.warning/info/caption, headers, expander labels).

Names come from users -- the orchestrator restricts the ones it writes, but anything written
through results_db's API (scripts, other tools) can hold ``*``, ``_``, ``|``, backticks,
``[x](y)``, ``<b>`` or ``$`` (Streamlit renders ``$...$`` as LaTeX) -- and must show as
typed, not as emphasis, links, HTML or math. Tables, selectors and charts show plain text and
need none of this.
"""

from __future__ import annotations

import re

from contract.textout import md_inline

_BACKTICKS = re.compile(r"`+")


def md(text: object) -> str:
    """``text`` as literal markdown inside a line: active characters escaped, line breaks
    as spaces (the escape is contract.textout.md_inline, shared with the Markdown exports)."""
    return md_inline(text)


def code(text: object) -> str:
    """``text`` as an inline code span, whatever backticks it holds (CommonMark: a fence
    longer than any backtick run inside; padded when the text starts or ends with one)."""
    flat = " ".join(str(text).splitlines())
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"
