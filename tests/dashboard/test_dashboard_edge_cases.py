"""Every dashboard page, under streamlit's AppTest, on the results DBs real users have
(tests/dashboard_edge_dbs.py writes them through results_db's real writer API): empty, all
pending / failed / diverged, only the baseline finished, no baseline, one variant, one seed,
a variant without finished runs, NaN / inf / 1e30 values and 0- or 1-point curves, 200
variants with markdown-breaking names, an LR ladder with divergence, unreadable files, and a
DB written while the pages render.

Every page must render without an exception, say so in words where there is nothing to show,
never show ``nan``/``None`` where a word belongs, never claim ``better``/``worse`` on one
seed or without data, and show user-supplied names as typed (no markdown interpretation).
"""

from __future__ import annotations

import html
import math
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from markdown_it import MarkdownIt
from streamlit.testing.v1 import AppTest

import results_db
from dashboard.boardtable import DELTA_PCT
from tests import dashboard_edge_dbs as edge

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
# elements whose text streamlit renders as markdown
TEXT_KINDS = ("markdown", "caption", "header", "subheader", "info", "warning", "error",
              "success")
ABLATION_KINDS = ("quality", "probes", "stability", "longctx")
_MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_NAN_WORD = re.compile(r"\b(nan|none|null)\b", re.IGNORECASE)


def rendered(markdown: str) -> str:
    """What a reader sees of ``markdown``: rendered (CommonMark + GFM tables), tags dropped."""
    return html.unescape(re.sub(r"<[^>]+>", "", _MD.render(markdown))).strip()


@dataclass
class Page:
    """What one page showed: its markdown texts (as rendered), tables, expander labels."""
    texts: list[str] = field(default_factory=list)
    tables: list[Any] = field(default_factory=list)  # pandas frames

    def says(self, fragment: str) -> bool:
        return any(fragment in t for t in self.texts)


def snapshot(at: AppTest) -> Page:
    assert not at.exception, [e.value for e in at.exception]
    page = Page()
    for kind in TEXT_KINDS:
        page.texts += [rendered(str(e.value)) for e in at.get(kind)]
    page.texts += [rendered(e.label) for e in at.get("expander")]
    page.tables += [d.value for d in at.dataframe] + [t.value for t in at.table]
    return page


def visit_all(url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Page]:
    """Every page the sidebar offers (each ablation table kind too), in one app session."""
    monkeypatch.setenv("GATESWEEP_DB", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    pages = {"Overview": snapshot(at)}
    if at.error:  # an unreadable DB: the app stops at its one message
        return pages
    for name in at.sidebar.radio(key="page").options[1:]:
        at.sidebar.radio(key="page").set_value(name).run()
        pages[name] = snapshot(at)
        if name == "Ablation tables" and any(r.key == "ab_kind" for r in at.radio):
            for kind in ABLATION_KINDS[1:]:
                at.radio(key="ab_kind").set_value(kind).run()
                pages[f"{name}/{kind}"] = snapshot(at)
    return pages


@pytest.fixture(scope="module")
def db_of(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """case -> URL of its DB, each built once per module."""
    root = tmp_path_factory.mktemp("edge")
    built: dict[str, str] = {}

    def get(case: str) -> str:
        if case not in built:
            built[case] = edge.build(case, root / f"{case}.db")
        return built[case]

    yield get


@pytest.fixture(scope="module")
def pages_of(db_of: Any) -> Iterator[Any]:
    """case -> {page: Page}, rendered once per module (several tests read one case)."""
    seen: dict[str, dict[str, Page]] = {}
    mp = pytest.MonkeyPatch()

    def get(case: str) -> dict[str, Page]:
        if case not in seen:
            seen[case] = visit_all(db_of(case), mp)
        return seen[case]

    yield get
    mp.undo()


# What each case must say, page by page (substrings of the rendered text).
EXPECT: dict[str, dict[str, tuple[str, ...]]] = {
    "empty": {"Overview": ("No sweeps in",), "Leaderboard": ("orchestrator submit",)},
    "all_pending": {"Leaderboard": ("No finished runs yet: 4 pending",),
                    "Ablation tables": ("No finished runs yet: 4 pending",),
                    "Curves": ("Pick at least one run",), "Run detail": ("Not started yet",)},
    "just_started": {"Curves": ("no points yet for these runs",)},  # the first minutes
    "all_failed": {"Leaderboard": ("4 failed",), "Ablation tables": ("4 failed",),
                   "Run detail": ("CUDA out of memory",)},
    "all_diverged": {"Leaderboard": ("4 diverged",)},
    "only_baseline_finished": {"Leaderboard": ("No result yet for 2 variant(s)",
                                               "gated (1 running, 1 failed)",
                                               "value (2 pending)")},
    "no_baseline": {"Leaderboard": ("no baseline",), "Ablation tables": ("no baseline",)},
    "single_variant": {"Leaderboard": ("baseline",)},
    "single_seed": {"Leaderboard": ("n = 1: no error bar for 2 row(s)",)},  # not the baseline
    "variant_without_finished_runs": {"Leaderboard": ("No result yet for 1 variant(s)",
                                                      "value (2 failed)")},
    "odd_values": {"Curves": ("training loss",)},
    "many_variants": {"Leaderboard": ("Showing the first 100 of 200 rows",)},
    "lr_all_diverged": {"LR stability": ("Max stable LR rule",)},
}


def _cells(frame: Any) -> Iterator[tuple[str, Any]]:
    for col in frame.columns:
        for v in frame[col].tolist():
            yield str(col), v


def _no_nan_words(case: str, pages: dict[str, Page]) -> None:
    """No table cell is empty/None/NaN and no cell or text says nan/None where a word
    belongs (numbers may be inf: a diverged PPL is infinite)."""
    for name, page in pages.items():
        for frame in page.tables:
            for col, v in _cells(frame):
                null = v is None or (isinstance(v, float) and math.isnan(v))
                assert not null, (case, name, col, "null cell")
                assert not (isinstance(v, str) and _NAN_WORD.search(v)), (case, name, col, v)
        for text in page.texts:
            assert not re.search(r"\bnan\b|\bNone\b", text), (case, name, text)


def _no_claims_without_seeds(case: str, pages: dict[str, Page]) -> None:
    """better/worse only on a row with >= 2 seeds and a value."""
    for name, page in pages.items():
        for frame in page.tables:
            verdict = next((c for c in ("verdict", "Verdict") if c in frame.columns), None)
            if verdict is None or "n" not in frame.columns:
                continue
            for _, row in frame.iterrows():
                if row[verdict] in ("better", "worse"):
                    assert int(row["n"]) >= 2, (case, name, dict(row))


@pytest.mark.parametrize("case", list(edge.FILLERS))
def test_every_page_renders_and_says_what_it_has(case: str, pages_of: Any) -> None:
    pages = pages_of(case)
    assert "Run detail" in pages  # the whole sidebar was visited
    for name, fragments in EXPECT.get(case, {}).items():
        for fragment in fragments:
            assert pages[name].says(fragment), (case, name, fragment, pages[name].texts)
    _no_nan_words(case, pages)
    _no_claims_without_seeds(case, pages)


@pytest.mark.parametrize(("case", "message"), [
    ("outdated_schema", "orchestrator db upgrade"),
    ("not_a_db", "file is not a database"),
    ("foreign_sqlite", "is not a gatesweep results DB"),
])
def test_unreadable_db_is_one_clear_message(case: str, message: str, pages_of: Any) -> None:
    pages = pages_of(case)
    assert list(pages) == ["Overview"]  # nothing else is drawn
    [error] = [t for t in pages["Overview"].texts if t.startswith("Cannot read the results DB")]
    assert message in error


def test_user_names_show_as_typed(pages_of: Any, db_of: Any,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A name with |, *, _, backticks, [x](y), <b> reads the same on every page that puts it
    in markdown (n = 1 warning, run header, rerun question), never as markup."""
    pages = pages_of("many_variants")
    name0 = edge.ODD_NAME + " #005"
    assert any(name0 in t for t in pages["Leaderboard"].texts if t.startswith("n = 1"))
    for page in pages.values():  # wherever a name is, it is whole
        for text in page.texts:
            if "bold" in text:
                assert edge.ODD_NAME in text, text
    monkeypatch.setenv("GATESWEEP_DB", db_of("many_variants"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.sidebar.radio(key="page").set_value("Run detail").run()
    variant = next(v for v in at.selectbox(key="rd_variant").options if "#000" in v)
    at.selectbox(key="rd_variant").set_value(variant).run()
    at.button(key="rd_rerun").click().run()
    texts = snapshot(at).texts
    run_name = f"{variant}-s0"  # expand's name: the one LR of the sweep is not in it
    assert any(t.startswith(f"{run_name} — variant {variant}, seed 0") for t in texts), texts
    assert any(t.startswith(f"Start a new attempt of {run_name}") for t in texts), texts


def test_huge_values_stay_readable(pages_of: Any) -> None:
    board = next(f for f in pages_of("odd_values")["Leaderboard"].tables if "verdict" in f)
    huge = board[board["variant"] == "huge"].iloc[0]
    assert huge["mean ± std"] == "1.50e+30 ± 7.07e+29"
    assert re.fullmatch(r"\+1\.49e\+31% \[-4\.81e\+31, \+7\.78e\+31\]", huge[DELTA_PCT])
    nanval = board[board["variant"] == "nanval"].iloc[0]
    assert (nanval["mean ± std"], nanval["verdict"]) == ("–", "no data")


def test_lr_ladder_with_a_variant_that_always_diverged(pages_of: Any) -> None:
    page = pages_of("lr_all_diverged")["LR stability"]
    summary = next(f for f in page.tables if "max stable LR" in f).set_index("variant")
    assert summary.loc["baseline", "max stable LR"] == "2e-3"  # 4e-3 diverged on every seed
    assert summary.loc["sdpa", "max stable LR"] == "4e-3"
    assert tuple(summary.loc["hopeless", ["best LR", "best val/loss", "max stable LR"]]) == \
        ("–", "–", "–")
    stab = next(f for f in pages_of("lr_all_diverged")["Ablation tables/stability"].tables
                if "Diverged" in f).set_index("Variant")
    assert stab.loc["hopeless", "Diverged"] == "6/6"


def test_pages_render_while_the_db_is_written(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer thread (its own connection, as a training process has) registers runs and
    logs metrics and summaries while every page renders: no exception, no 'locked'."""
    url = edge.build("single_seed", tmp_path / "live.db")
    stop = threading.Event()
    errors: list[BaseException] = []

    def write() -> None:
        db = results_db.open(url)
        try:
            w = edge.Writer(db)
            i = 0
            while not stop.is_set():
                # a run is its config (the fingerprint): rope_base makes each one new
                w.run(f"live{i}", gates=edge.G1, ppl=9.0, status="running" if i % 2 else
                      "succeeded", points=[(s, "train/loss", 3.0) for s in range(1, 200)],
                      rope_base=20000.0 + i)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            db.close()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        # every page once, read afresh while the writer writes (a second pass doubled the
        # test's 8 s for no page the first had not read under the same writes)
        st.cache_data.clear()
        pages = visit_all(url, monkeypatch)
        assert not any("locked" in t for p in pages.values() for t in p.texts)
    finally:
        stop.set()
        writer.join(timeout=30)
    assert not errors, errors
    with results_db.open(url, readonly=True) as db:  # the writer did write meanwhile
        assert db.runs(sweep=edge.SWEEP).height > 3


def test_curves_and_run_detail_with_empty_single_point_and_odd_curves(
        db_of: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """odd_values: a run with no metric point, one with a single point, curves holding 1e30,
    inf and NaN -- under every Curves option, and in Run detail."""
    import json

    monkeypatch.setenv("GATESWEEP_DB", db_of("odd_values"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.sidebar.radio(key="page").set_value("Curves").run()
    at.toggle(key="cv_log").set_value(True).run()
    at.selectbox(key="cv_mode").set_value("each run").run()
    at.radio(key="cv_x").set_value("tokens").run()
    assert snapshot(at).says("training loss") and len(at.get("vega_lite_chart")) == 2
    at.sidebar.radio(key="page").set_value("Run detail").run()
    at.selectbox(key="rd_variant").set_value("nopoints").run()
    empty, single = at.selectbox(key="rd_run").options
    at.selectbox(key="rd_run").set_value(empty).run()
    assert snapshot(at).says("No training points were recorded (status succeeded).")
    assert not at.get("vega_lite_chart")
    at.selectbox(key="rd_run").set_value(single).run()
    [chart] = at.get("vega_lite_chart")  # one point: drawn as a point, not an invisible line
    assert {"type": "point", "filled": True, "size": 80} in \
        [layer["mark"] for layer in json.loads(chart.proto.spec)["layer"]]
    snapshot(at)


@pytest.mark.parametrize("ref", ["²", "١", "-1", " 1", "1e3", "99999999999999999999999", ""])
def test_run_detail_link_with_a_non_ascii_or_odd_run_id(ref: str, db_of: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile input: ``?page=Run detail&run=²`` crashed the page (str.isdigit accepts '²', int()
    refuses it); '١' was read as run 1. One rule (contract/ids.py): ASCII digits only, so
    these preselect nothing and the page shows its first run."""
    monkeypatch.setenv("GATESWEEP_DB", db_of("single_seed"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = "Run detail"
    at.query_params["run"] = ref
    at.run()
    snapshot(at)  # no exception
    variants = at.selectbox(key="rd_variant").options
    assert at.selectbox(key="rd_variant").value == variants[0]


def test_run_detail_shows_a_provenance_config_that_is_not_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile provenance: a deepspeed_config a DB writer stored as plain text
    crashed Run detail with JSONDecodeError; it is shown as stored."""
    import sqlite3

    from tests.support import report_db

    path = tmp_path / "p.db"
    report_db.build(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE provenance SET deepspeed_config = '{not json' WHERE run_id = 1")
    conn.close()
    monkeypatch.setenv("GATESWEEP_DB", f"sqlite:///{path}")
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["page"] = "Run detail"
    at.query_params["run"] = "1"
    at.run()
    snapshot(at)  # no exception
    assert "{not json" in [c.value for c in at.code]
