"""A page's view kept in the URL (st.query_params), so a copied link reopens the same view: the
page and sweep (app.py), the run (Run detail), and the widgets a page binds here (Explore,
Curves).

A link is data from anyone, read like a YAML key: ``read`` is the one parser of every query
value. It is typed by its default (text, bool, int, float, a list of scalars, a brush's
``{key: [scalar, ...]}``), bounded in size and depth before ``json.loads`` runs
(dashboard/jsontext.py), and checked against the page's options; a value that fails is
dropped for the default and named in one notice at the top of the page (``notice``), never a
traceback.

``bind`` runs before a widget: on the session's first page run it seeds the widget's state
from ``?key=...`` (else the default), so the widget is then created without a default of its
own; ``publish`` runs after the widgets and writes their values back, dropping the bound keys
of other pages.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import streamlit as st

from dashboard import jsontext

# the prefix of the widget keys each page binds: a link carries the current page's only
PAGE_PREFIX: dict[str, str] = {"Explore": "ex_", "Curves": "cv_"}
PREFIXES: tuple[str, ...] = tuple(PAGE_PREFIX.values())
_LOADED = "_url_loaded"  # the keys already seeded from the URL in this session
_DROPPED = "_url_dropped"  # {key: why} of this page run, for ``notice``
MAX_CHARS = 4096  # a view's value: a few dozen keys or ids, never more
MAX_TEXT = 300  # a page, sweep, run or option name
# the deepest value a view holds: a brush {axis: [lo, hi]}; a list of names is 1
MAX_DEPTH = 2
Scalar = (str, int, float)


def _shaped(got: Any, default: Any) -> bool:
    """Whether a parsed value has the default's type (an int counts as a float)."""
    def scalars(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(x, Scalar) and not isinstance(x, bool)
                                           for x in v)
    if isinstance(default, bool) or isinstance(default, str):
        return type(got) is type(default)
    if isinstance(default, float):
        return type(got) in (int, float)
    if isinstance(default, int):
        return type(got) is int
    if isinstance(default, list):
        return scalars(got)
    if isinstance(default, dict):
        return isinstance(got, dict) and all(isinstance(k, str) and scalars(v)
                                             for k, v in got.items())
    return False


def _parse(raw: str, default: Any) -> Any:
    """The value of ``raw`` in the default's type; ValueError saying why it does not fit."""
    if isinstance(default, str) or default is None:
        if len(raw) > MAX_TEXT or not raw.isprintable():
            raise ValueError("not a name")
        return raw
    got = jsontext.loads(raw, max_chars=MAX_CHARS, max_depth=MAX_DEPTH)
    if not _shaped(got, default):
        raise ValueError(f"not a {type(default).__name__} of the expected kind")
    return got


def drop(key: str, why: str) -> None:
    """Name ``key`` in this page run's notice (a caller's own check refused its value)."""
    st.session_state.setdefault(_DROPPED, {})[key] = why


def read(key: str, default: Any, *, options: Sequence[Any] | None = None,
         check: Callable[[Any], bool] | None = None) -> Any:
    """``?key=`` parsed in ``default``'s type, among ``options`` (a list: the elements that
    are) and passing ``check``; ``default`` when absent, and when it does not fit (named in
    the notice)."""
    raw = st.query_params.get(key)
    if raw is None:
        return default
    try:
        got = _parse(raw, default)
    except ValueError as exc:
        drop(key, str(exc))
        return default
    if options is not None and isinstance(got, list):
        kept = [v for v in got if v in options]
        if len(kept) < len(got):
            drop(key, "an option that is not offered")
        got = kept
    elif options is not None and got not in options:
        drop(key, "not an option here")
        return default
    if check is not None and not check(got):
        drop(key, "out of range")
        return default
    return got


def bind(key: str, default: Any, *, options: Sequence[Any] | None = None,
         check: Callable[[Any], bool] | None = None) -> None:
    """Give widget ``key`` its state before it is created: from ``?key=`` on the session's
    first run (``read``), else ``default``."""
    loaded: set[str] = st.session_state.setdefault(_LOADED, set())
    if key in loaded and key in st.session_state:
        if options is not None and not _fits(st.session_state[key], options):
            st.session_state[key] = default  # e.g. an option of another sweep
        return
    loaded.add(key)
    present = key in st.query_params
    value = read(key, default, options=options, check=check)
    if key not in st.session_state or present:
        st.session_state[key] = value


def _fits(value: Any, options: Sequence[Any]) -> bool:
    if isinstance(value, list):
        return all(v in options for v in value)
    return value in options


def notice(slot: Any) -> None:
    """One line in ``slot`` (a placeholder at the top of the page) naming the link values
    this page run dropped, if any."""
    dropped: dict[str, str] = st.session_state.pop(_DROPPED, {})
    if dropped:
        what = "; ".join(f"{k} ({why})" for k, why in sorted(dropped.items()))
        slot.info(f"Ignored from the link, showing the default instead: {what}.")


def _encode(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


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
