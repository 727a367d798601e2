"""benchmarks/reproduction_table.py shows the API's own baseline, CIs, verdicts, effects and
stability (no rule of its own): its Markdown, rendered from the dashboard's sample sweep, must
carry exactly what db.leaderboard / db.findings / db.stability say."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import results_db

ROOT = Path(__file__).resolve().parents[2]


def _module():
    spec = importlib.util.spec_from_file_location("reproduction_table",
                                                  ROOT / "benchmarks/reproduction_table.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.support import dashboard_sample as sample

    return sample.write_db(tmp_path_factory.mktemp("repro") / "r.db")


def _table(md: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the Markdown table whose header starts with ``| first_header |`` and has
    a Verdict column."""
    lines = md.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first_header} |")
                 and "Verdict" in ln)
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    out = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        out.append(dict(zip(head, [c.strip() for c in ln.strip("|").split("|")], strict=True)))
    return out


def test_quality_table_shows_the_api_verdicts(url: str) -> None:
    md = _module().render(url, "demo")
    with results_db.open(url, readonly=True) as db:
        board = db.leaderboard("demo")
        summary = db.findings("demo").text()
        base = db.baseline("demo")
    assert f"baseline `{base}`" in md and summary in md
    shown = {r["Variant"]: r for r in _table(md, "Variant")}
    for r in board.iter_rows(named=True):
        assert shown[r["variant"]]["Verdict"] == r["verdict"]
    assert board.filter(variant="sdpa_elementwise")["verdict"][0] == "better"


def test_effects_and_stability_sections(url: str) -> None:
    mod = _module()
    md = mod.render(url, "demo")
    with results_db.open(url, readonly=True) as db:
        eff = db.effects("demo")
        assert db.stability("demo") is None
    shown = [(r["Dimension"], r["Value"], r["Verdict"]) for r in _table(md, "Dimension")]
    assert shown == [(r["dimension"], r["value"], r["verdict"])
                     for r in eff.iter_rows(named=True)] and len(shown) >= 4
    assert "An LR is stable" not in md  # one learning rate: no stability curve
    lr_md = mod.render(url, "demo-lr")
    with results_db.open(url, readonly=True) as db:
        st = db.stability("demo-lr")
    assert st is not None and st.rule in lr_md
    assert lr_md.count("| baseline | ") >= st.curve.filter(variant="baseline").height
