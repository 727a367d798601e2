"""Issue 35's hostile pass on `orchestrator report`: a variant name holding a control
character (any writer of a shared results DB can store one) aborted the Markdown report:
vl-convert's SVG renderer panicked ("thread caused non-unwinding panic"), so the whole
report builder died. The figures now draw such characters as visible \\xNN."""

from __future__ import annotations

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
