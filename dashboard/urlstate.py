"""A page's view kept in the URL (st.query_params), so a copied link reopens the same view: the
page and sweep (app.py), and the widgets a page binds here (Explore, Curves).

``bind`` runs before a widget: on the session's first page run it seeds the widget's state
from ``?key=...`` (else the default), so the widget is then created without a default of its
own; ``publish`` runs after the widgets and writes their values back, dropping the bound keys
of other pages. Values travel as JSON (lists, numbers, booleans, brushes), a plain string as
itself; one that no longer fits (an option that is gone, bad JSON) falls back to the default.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import streamlit as st

# the prefix of the widget keys each page binds: a link carries the current page's only
PAGE_PREFIX: dict[str, str] = {"Explore": "ex_", "Curves": "cv_"}
PREFIXES: tuple[str, ...] = tuple(PAGE_PREFIX.values())
_LOADED = "_url_loaded"  # the keys already seeded from the URL in this session


def _decode(text: str, default: Any) -> Any:
    if isinstance(default, str) or default is None:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return default


def _encode(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def bind(key: str, default: Any, *, options: Sequence[Any] | None = None,
         check: Callable[[Any], bool] | None = None) -> None:
    """Give widget ``key`` its state before it is created: from ``?key=`` on the session's
    first run (when the value is among ``options`` / passes ``check``), else ``default``.
    A list keeps the elements that are among ``options``."""
    loaded: set[str] = st.session_state.setdefault(_LOADED, set())
    if key in loaded and key in st.session_state:
        if options is not None and not _fits(st.session_state[key], options):
            st.session_state[key] = default  # e.g. an option of another sweep
        return
    loaded.add(key)
    value = default
    raw = st.query_params.get(key)
    if raw is not None:
        got = _decode(raw, default)
        if isinstance(default, list) and isinstance(got, list) and options is not None:
            got = [v for v in got if v in options]
        typed = type(got) is type(default) or (isinstance(default, float)
                                                and type(got) is int)
        ok = typed and (options is None or _fits(got, options)) and \
            (check is None or check(got))
        value = got if ok else default
    if key not in st.session_state or raw is not None:
        st.session_state[key] = value


def _fits(value: Any, options: Sequence[Any]) -> bool:
    if isinstance(value, list):
        return all(v in options for v in value)
    return value in options


def publish(keys: Iterable[str], extra: dict[str, Any] | None = None) -> None:
    """Write the bound widgets' values (and ``extra`` values) to the URL; bound keys of other
    pages are dropped. Only what changed is written (each write updates the browser's
    address bar)."""
    want = {k: _encode(st.session_state[k]) for k in keys if k in st.session_state}
    want.update({k: _encode(v) for k, v in (extra or {}).items() if v is not None})
    for k in [k for k in st.query_params if k.startswith(PREFIXES) and k not in want]:
        del st.query_params[k]
    for k, v in want.items():
        if st.query_params.get(k) != v:
            st.query_params[k] = v


def keep_page(page: str) -> None:
    """Drop the URL keys other pages bound (app.py, before it draws ``page``)."""
    mine = PAGE_PREFIX.get(page)
    for k in [k for k in st.query_params if k.startswith(PREFIXES)
              and (mine is None or not k.startswith(mine))]:
        del st.query_params[k]
