"""One colour per variant on every chart and table of the app (a verdict is shown by marker
shape and label, charts.VERDICT_SHAPES, never by a hue that a variant also uses).

Every chart colours by variant through ``scale(variants)`` built from the sweep's whole variant
list (``data.variants``: baseline first, then declared order), never from the rows a chart
happens to show, so a variant keeps its colour from chart to chart and page to page.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt

# Tableau 10, then its light tones: distinct for 20 variants; beyond that the cycle repeats
# (a 30-variant sweep is read through the tables and the filters, not by colour alone).
COLORS: tuple[str, ...] = (
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#ff9da6",
    "#9d755d", "#bab0ac", "#9ecae9", "#ffbf79", "#88d27a", "#ff9d98", "#a2d4d0", "#d6a5c9",
    "#f2cf5b", "#fcbfd2", "#d8b5a5", "#79706e")
BASELINE_COLOR = "#333333"  # the baseline is drawn dark: the reference every eye looks for

def colors(variants: Sequence[str], baseline: str | None = None) -> dict[str, str]:
    """{variant: hex colour} for the sweep's variants in a fixed order."""
    out: dict[str, str] = {}
    i = 0
    for v in variants:
        if v in out:
            continue
        if v == baseline:
            out[v] = BASELINE_COLOR
            continue
        out[v] = COLORS[i % len(COLORS)]
        i += 1
    return out


def scale(cmap: dict[str, str], shown: Sequence[str] | None = None) -> alt.Scale:
    """The Altair colour scale of ``cmap`` (``colors(...)``), restricted to the variants a
    chart shows: each keeps its sweep-wide colour, and a 3,000-variant sweep does not put
    3,000 entries in every spec (Altair validates each: ~1.3 s per chart)."""
    keep = [v for v in cmap if shown is None or v in set(shown)]
    return alt.Scale(domain=keep, range=[cmap[v] for v in keep])
