"""Hostile input to `orchestrator report`: a variant name holding a control
character (any writer of a shared results DB can store one) aborted the Markdown report:
vl-convert's SVG renderer panicked ("thread caused non-unwinding panic"), so the whole
report builder died. The figures now draw such characters as visible \\xNN."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vl_convert", reason="vl-convert-python (the report extra) is not installed")

from dashboard.report import vega  # noqa: E402


def _bars(label: str) -> dict[str, Any]:
    return {"$schema": "https://vega.github.io/schema/vega-lite/v5.json",
            "data": {"values": [{"variant": label, "x": 1.0}, {"variant": "baseline", "x": 2.0}]},
            "mark": "bar", "encoding": {"y": {"field": "variant", "type": "nominal"},
                                        "x": {"field": "x", "type": "quantitative"}}}


@pytest.mark.parametrize("label", ["a\x1bb", "bell\x07", "\x1b]0;pwned\x07"])
def test_a_control_character_in_a_label_draws_as_text(label: str) -> None:
    doc = vega.svg(_bars(label))
    assert doc.lstrip().startswith("<svg") and "\x1b" not in doc and "\x07" not in doc
    assert "\\x1b" in doc or "\\x07" in doc


SPOOF = "\u202e\x1b[31m\x07"  # right-to-left override, an ESC sequence, BEL


def test_control_characters_in_db_strings_are_shown_not_kept_in_the_html(
        tmp_path: Path) -> None:
    """A sweep description, a variant name, a run's error and its provenance holding U+202E,
    ESC and BEL (any writer of a shared DB can store them): the HTML report kept them raw, so
    the override reversed the text that followed it on the page. Each is now shown as text
    (textout.terminal: ``\\u202e``, ``\\x1b``, ``\\x07``), in the tables and in the charts."""
    import results_db
    from dashboard.report import content, html
    from tests.support import report_db, synthdb

    url = f"sqlite:///{tmp_path / 'h.db'}"
    with results_db.open(url) as db:
        regs = synthdb.register(db, {
            "name": "h", "description": f"about {SPOOF} this",
            "base": {"model": {"preset": "tiny"}},
            "variants": {"baseline": {}, "g1": {"gate.position": "G1"}}, "seeds": [0, 1]},
            labels={"g1": f"g1{SPOOF}x"})
        prov = {**report_db.provenance(), "cpu_model": f"cpu{SPOOF}"}
        for r in regs:
            failed = r.run.variant != "baseline" and r.run.seed == 1
            synthdb.play(db, r.id, "failed" if failed else "succeeded",
                         summaries={"val/ppl": 5.0 + r.run.seed},
                         points=[(s, "train/loss", 3.0 - s / 100) for s in (10, 20)],
                         provenance=prov, error=f"boom {SPOOF}")
    with results_db.open(url, readonly=True) as db:
        page = html.render(content.build(db, "h"), "")
    assert not [c for c in ("\u202e", "\x1b", "\x07") if c in page]
    assert "<p>about \\u202e\\x1b[31m\\x07 this</p>" in page
    assert "g1\\u202e\\x1b[31m\\x07x" in page  # the variant, in the tables
    assert "g1\\\\u202e\\\\x1b[31m\\\\x07x" in page  # and in the charts' JSON
