"""Vega without a network: the JavaScript of vega, vega-lite and vega-embed as one bundle from
the vl-convert-python package (it ships them; building the bundle takes ~2 s, so it is kept
in the user's cache folder per vl-convert and Vega-Lite version), and static SVG figures for
the Markdown report, drawn by the same libraries."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from contract.textout import terminal


def vl_version() -> str:
    """The Vega-Lite major.minor Altair writes its specs for (e.g. "6.4")."""
    import altair as alt

    return ".".join(alt.VEGALITE_VERSION.split(".")[:2])


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gatesweep"


def javascript_bundle() -> str:
    """vegaEmbed, vega and vegaLite as globals, in one script (no imports, no CDN)."""
    import vl_convert as vlc

    version = getattr(vlc, "__version__", "") or vlc.get_vega_version()
    path = _cache_dir() / f"vega-bundle-{version}-vl{vl_version()}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    # (the stub makes the snippet required; left out, the default one sets the globals)
    js = vlc.javascript_bundle(vl_version=vl_version())  # type: ignore[call-arg]
    try:  # a cache that cannot be written costs the 2 s again next time, nothing else
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(js, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
    return js


def svg(spec: dict[str, Any]) -> str:
    """The chart as a standalone SVG document (Markdown figures). Control characters in its
    text (a variant a DB writer named with ESC or BEL) are drawn as visible ``\\xNN``:
    vl-convert's renderer aborted the whole report on them ("non-unwinding panic")."""
    import vl_convert as vlc

    return str(vlc.vegalite_to_svg(visible(spec), vl_version=vl_version()))


def visible(value: Any) -> Any:
    """``value`` (a spec, its data) with every string's control characters and bidi
    overrides shown as text (textout.terminal), keys too, so a field named by a DB string
    still matches its data."""
    if isinstance(value, str):
        return terminal(value)
    if isinstance(value, dict):
        return {terminal(k): visible(v) for k, v in value.items()}
    if isinstance(value, list):
        return [visible(v) for v in value]
    return value
