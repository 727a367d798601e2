"""The sweep report (dashboard/report/, `orchestrator report`) on the 57-run gates-toy sweep
registered by the real submit path (tests/support/report_db.py): every section is there, the
leaderboard's numbers are the CLI's, nothing is loaded from the network, user text is escaped,
mixed provenance is flagged, and the Markdown form links SVG figures written beside it. The
charts drawn in a real browser: tests/e2e/test_report_browser.py."""

from __future__ import annotations

import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest

import results_db
from dashboard.boardtable import DELTA_PCT
from dashboard.report import content
from orchestrator.cli.main import main
from tests.support import report_db

SECTIONS = ("answers", "leaderboard", "ablation", "stability", "scaling", "curves", "config",
            "provenance")
CHARTS = ("leaderboard-chart", "stability-chart", "scaling-chart", "curve-train-loss",
          "curve-val-loss")


class Tables(HTMLParser):
    """{table id: [[cell text, ...], ...]} (header row first) of an HTML document."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._id: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._id = dict(attrs).get("id") or ""
            self.tables[self._id] = []
        elif tag == "tr" and self._id is not None:
            self.tables[self._id].append([])
        elif tag in ("td", "th") and self._id is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._id is not None and self._cell is not None:
            self.tables[self._id][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._id = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> str:
    return report_db.build(f"sqlite:///{tmp_path_factory.mktemp('rep') / 'r.db'}", mixed=True)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code = main(list(args))
    cap = capsys.readouterr()
    assert code == 0, cap.err
    return cap.out


def test_the_html_report_holds_every_section_and_the_clis_numbers(
        capsys: pytest.CaptureFixture[str], mixed: str, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    said = _cli(capsys, "report", report_db.SWEEP, "--db", mixed, "--out", str(out))
    assert said.startswith(f"report: {out} (")
    html = out.read_text(encoding="utf-8")
    for s in SECTIONS:
        assert f'<section id="{s}">' in html, s
    for c in CHARTS:
        assert f'<div class="chart" id="{c}">' in html and f'data-chart="{c}"' in html, c
    # no server, no network: no external script, stylesheet, image or font
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?https?:""", html)
    assert html.count("<script>") == 2 and "vegaEmbed" in html
    assert out.stat().st_size < 5 * 2**20
    # the leaderboard: the CLI's rows, values and verdict sentence
    board = json.loads(_cli(capsys, "leaderboard", report_db.SWEEP, "--db", mixed,
                            "--format", "json"))
    parser = Tables()
    parser.feed(html)
    head, *rows = parser.tables["leaderboard-table"]
    assert head == list(content.BOARD_COLUMNS) and len(rows) == len(board["rows"])
    from dashboard.tables import fmt_delta_ci, fmt_mean_std

    for got, want in zip(rows, board["rows"], strict=True):
        cell = dict(zip(head, got, strict=True))
        assert cell["rank"] == str(want["rank"]) and cell["n"] == str(want["n"])
        assert cell["variant"].startswith(want["variant"])
        assert cell["mean ± std"] == fmt_mean_std(want["mean"], want["std"])
        if not want["is_baseline"]:
            assert cell[DELTA_PCT] == fmt_delta_ci(want["delta_pct"], want["ci_low_pct"],
                                                   want["ci_high_pct"])
    # the first page: the answers, as the CLI's leaderboard opens with them
    answers = results_db.open(mixed, readonly=True).findings(report_db.SWEEP).lines()
    assert board["summary"].splitlines()[:len(answers)] == answers
    first = html.index('<section id="answers">')
    assert first < html.index('<section id="leaderboard">')
    for line in answers:
        assert f"<p>{escape(line)}</p>" in html[first:]
    # mixed provenance: said on top, and the differing columns flagged
    mix = results_db.open(mixed, readonly=True).code_mix(report_db.SWEEP).sentence
    assert mix and f'<p class="flag" id="mixed">{mix.replace(chr(39), "&#x27;")}</p>' in html
    combos = parser.tables["provenance-table"]
    assert len(combos) == 3  # header + two combinations (54 and 3 runs)
    assert '<th class="flag">code</th>' in html and '<th class="flag">torch</th>' in html
    assert len(parser.tables["provenance-runs"]) == 58  # every run, folded
    assert parser.tables["ablation-table"][0][:2] == ["Variant", "Method"]
    assert any(r[0] == "sdpa_silu" for r in parser.tables["config-diff"][1:])


def test_user_text_is_escaped_and_cannot_close_a_script(tmp_path: Path) -> None:
    from tests.support import synthdb

    url = f"sqlite:///{tmp_path / 'h.db'}"
    db = results_db.open(url)
    evil = "</script><img src=x onerror=alert(1)>"
    regs = synthdb.register(db, {"name": "h", "base": {"model": {"preset": "tiny"}},
                                 "variants": {"baseline": {}, "g1": {"gate.position": "G1"}},
                                 "seeds": [0, 1]}, labels={"g1": evil})
    for r in regs:
        synthdb.play(db, r.id, summaries={"val/ppl": 5.0 + r.run.seed + (r.run.variant == "g1")},
                     points=[(s, "train/loss", 3.0 - s / 100) for s in (10, 20)],
                     provenance=report_db.provenance())
    from dashboard.report import html, vega

    bundle = vega.javascript_bundle()
    text = html.render(content.build(results_db.open(url, readonly=True), "h"), bundle)
    assert evil not in text
    markup = re.sub(r"<script[^>]*>.*?</script>", "", text, flags=re.S)  # outside scripts
    assert "<img" not in markup
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in text  # in the tables
    assert "<\\/script><img" in text  # in the charts' JSON: a string, not markup


def test_markdown_links_svg_figures_written_beside_it(capsys: pytest.CaptureFixture[str],
                                                      mixed: str, tmp_path: Path) -> None:
    out = tmp_path / "appendix" / "gates.md"
    out.parent.mkdir()
    said = _cli(capsys, "report", report_db.SWEEP, "--db", mixed, "--out", str(out),
                "--format", "markdown")
    assert "5 figure(s) in gates_files/" in said
    text = out.read_text(encoding="utf-8")
    links = re.findall(r"\]\((gates_files/[^)]+\.svg)\)", text)
    assert sorted(Path(link).stem for link in links) == sorted(CHARTS)
    for link in links:
        svg = (out.parent / link).read_text(encoding="utf-8")
        assert svg.lstrip().startswith("<svg") and "<path" in svg
    assert "## Answers" in text and "## Every (variant, LR) row (val/ppl)" in text
    assert "> **Mixed provenance" in text


def _figures(md_file: Path) -> list[Path]:
    """The images a CommonMark reader finds in ``md_file``, resolved from its folder."""
    from urllib.parse import unquote

    from markdown_it import MarkdownIt

    srcs = [c.attrs["src"] for t in MarkdownIt().parse(md_file.read_text(encoding="utf-8"))
            if t.children for c in t.children if c.type == "image"]
    return [md_file.parent / unquote(str(s)) for s in srcs]


@pytest.mark.slow  # two report builds, one through the CLI's child (~6 s)
def test_markdown_figure_links_resolve_from_any_folder_name(
        capsys: pytest.CaptureFixture[str], mixed: str, tmp_path: Path) -> None:
    """A report written into "my results (v2)/" as "gates report (final).md": its figures'
    folder "gates report (final)_files" held a space and parentheses, which ended the links
    (a CommonMark reader found no image). Links are URL-quoted, and a --figures folder away
    from the report is linked by its relative path, not by its name alone."""
    out = tmp_path / "my results (v2)" / "gates report (final).md"
    out.parent.mkdir()
    _cli(capsys, "report", report_db.SWEEP, "--db", mixed, "--out", str(out), "--format",
         "markdown")
    found = _figures(out)
    assert sorted(f.stem for f in found) == sorted(CHARTS)
    assert all(f.is_file() and f.parent.name == "gates report (final)_files" for f in found)
    from dashboard.report.__main__ import write

    away = tmp_path / "figs [x] #1"
    write(report_db.SWEEP, mixed, out, "markdown", away)
    found = _figures(out)
    assert len(found) == len(CHARTS)
    assert all(f.is_file() and f.resolve().parent == away.resolve() for f in found)


def test_bad_input_is_one_line_and_writes_nothing(capsys: pytest.CaptureFixture[str],
                                                  mixed: str, tmp_path: Path) -> None:
    for args, msg in ((["nope"], "no sweep named 'nope'"),
                      ([report_db.SWEEP, "--format", "pdf"], "--format: 'pdf' is not one of"),
                      ([report_db.SWEEP, "--out", str(tmp_path / "no" / "r.html")],
                       "does not exist")):
        assert main(["report", *args, "--db", mixed]) == 2
        assert msg in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("case", ["all_pending", "all_failed", "all_diverged", "no_baseline",
                                  "single_seed", "odd_values", "lr_all_diverged", "empty"])
def test_real_world_dbs_give_a_report(case: str, tmp_path: Path) -> None:
    """The dashboard's edge-case DBs (tests/dashboard_edge_dbs.py: nothing finished, no
    baseline, one seed, NaN / inf / 1e30, an LR ladder diverged everywhere, no sweep): each
    report builds, and its charts' JSON holds no NaN (JSON.parse would refuse it)."""
    from dashboard.report import html, markdown
    from tests import dashboard_edge_dbs as edge

    url = edge.build(case, tmp_path / "e.db")
    report = content.build(results_db.open(url, readonly=True), edge.SWEEP)
    page = html.render(report, "")
    assert "NaN" not in page and "Infinity" not in page
    assert markdown.render(report, "f", lambda c: f"{c.id}.svg").startswith("# Sweep edge")
