"""Vega without a network: the JavaScript of vega, vega-lite and vega-embed as one bundle from
the vl-convert-python package (it ships them; building the bundle takes ~2 s, so it is kept
per vl-convert and Vega-Lite version in a private cache folder, bundlecache.py), and static
SVG figures for the Markdown report, drawn by the same libraries."""

from __future__ import annotations

from typing import Any

from contract.textout import terminal
from dashboard.report import bundlecache


def vl_version() -> str:
    """The Vega-Lite major.minor Altair writes its specs for (e.g. "6.4")."""
    import altair as alt

    return ".".join(alt.VEGALITE_VERSION.split(".")[:2])


def javascript_bundle() -> str:
    """vegaEmbed, vega and vegaLite as globals, in one script (no imports, no CDN); kept in a
    private, checked cache (bundlecache.py): it is inlined into every HTML report."""
    import vl_convert as vlc

    version = getattr(vlc, "__version__", "") or vlc.get_vega_version()
    name = f"vega-bundle-{version}-vl{vl_version()}.js"
    if (cached := bundlecache.read(name)) is not None:
        return cached
    # (the stub makes the snippet required; left out, the default one sets the globals)
    js = str(vlc.javascript_bundle(vl_version=vl_version()))  # type: ignore[call-arg]
    bundlecache.write(name, js)
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
