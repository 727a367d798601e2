"""What a report holds, independent of its format: sections of sentences, tables of display
strings and charts (Vega-Lite specs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

CHART_WIDTH = 760  # px: the report's text column; the dashboard's charts fill their container


@dataclass(frozen=True)
class Table:
    id: str
    frame: pl.DataFrame  # display strings, one column per header
    caption: str = ""
    flagged: frozenset[str] = frozenset()  # columns whose values differ where they must not
    collapsed: bool = False  # long detail (every run): folded in HTML


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    spec: dict[str, Any]  # Vega-Lite JSON, data inline


Block = Table | Chart


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    sentences: tuple[str, ...] = ()
    blocks: tuple[Block, ...] = ()


@dataclass(frozen=True)
class Report:
    sweep: str
    description: str
    generated: str  # "2026-12-03 10:30 UTC"
    db: str  # the results DB's URL, password hidden
    counts: str  # "57 runs: 57 succeeded"
    flags: tuple[str, ...]  # warnings for the top of the report (mixed provenance)
    sections: tuple[Section, ...] = field(default_factory=tuple)

    def charts(self) -> list[Chart]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Chart)]


def chart(id: str, title: str, altair_chart: Any) -> Chart:  # noqa: A002 - the element id
    """An Altair chart as a Chart block: its Vega-Lite dict at the report's width (a facet
    chart keeps its panel size)."""
    spec = altair_chart.to_dict(validate=False)
    if "facet" not in spec and "width" not in spec:
        spec["width"] = CHART_WIDTH
    return Chart(id, title, spec)
