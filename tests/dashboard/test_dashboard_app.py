"""Each dashboard page under streamlit's AppTest, against a DB written by results_db's real
writer API (tests/support/dashboard_sample.py: ensure_sweep, register_runs, start_attempt,
log_metrics, log_summaries, add_artifact, finish_attempt). Statistics come from results_db
(db.leaderboard & co., tested in tests/test_analysis_*.py); these tests check that the pages show
them, and
compare the page with the API on the same DB. Means worked out by hand from sample.SAMPLE:

    baseline          10.0 10.2 10.4 -> 10.200 ± 0.200 (n 3)
    sdpa_elementwise   9.0  9.1  9.2 ->  9.100 ± 0.100 (n 3), Δ -10.8 %
    sdpa_headwise      9.5  9.7  9.9 ->  9.700 ± 0.200 (n 3), Δ  -4.9 %
    value_elementwise  9.8 10.0 fail ->  9.900 ± 0.141 (n 2), Δ  -2.9 %
    sdpa_ns_sigmoid   div. 11.0 11.4 -> 11.200 ± 0.283 (n 2), Δ  +9.8 %
    key_elementwise   running, pending (no results)

The LR ladder (sample.fill_lr, sweep demo-lr): baseline vs G1 at 4 LRs x 2 seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import results_db
from dashboard import palette
from dashboard.boardtable import DELTA, DELTA_PCT
from dashboard.mdtext import md
from tests.support import dashboard_sample as sample

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'results.db'}"
    db = results_db.open(url)
    sample.fill(db)
    sample.fill_lr(db)
    db.close()
    return url


@pytest.fixture
def app(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.query_params["sweep"] = "demo"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def goto(at: AppTest, page: str, sweep: str | None = None) -> AppTest:
    if sweep is not None:
        at.sidebar.selectbox(key="sweep").set_value(sweep).run()
    at.sidebar.radio(key="page").set_value(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def chart_data(at: AppTest) -> list[list]:
    """Per chart, its datasets as pandas frames (streamlit ships them beside the spec)."""
    from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df

    return [[convert_arrow_bytes_to_pandas_df(d.data.data) for d in c.proto.datasets]
            for c in at.get("vega_lite_chart")]


def variant_colors(spec: dict) -> dict[str, str]:
    """{variant: colour} of every variant colour scale in a (layered/faceted) spec."""
    out: dict[str, str] = {}

    def walk(node: object) -> None:
        if isinstance(node, dict):
            col = node.get("color")
            if isinstance(col, dict) and col.get("field") == "variant" and "scale" in col:
                sc = col["scale"]
                out.update(zip(sc["domain"], sc["range"], strict=True))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return out


def chart_rows(frames: list) -> int:
    """Data rows across a chart's datasets (an empty chart has none)."""
    return sum(len(f) for f in frames)


def test_overview_counts_progress_and_live_runs(app: AppTest) -> None:
    app = goto(app, "Overview")  # the first screen is the Answers page
    frame = app.dataframe[0].value
    row = frame[frame["sweep"] == "demo"].iloc[0]
    assert (row["succeeded"], row["failed"], row["diverged"]) == (13, 1, 1)
    assert (row["running"], row["pending"], row["total"]) == (1, 1, 17)
    assert row["progress"] == pytest.approx(15 / 17)
    live = app.dataframe[1].value.set_index("run")
    assert set(live.index) == {"key_elementwise-s0", "key_elementwise-s1"}
    running = live.loc["key_elementwise-s0"]
    # sample.loss_curve: 100 steps of train/loss logged, v_index 5, seed 0
    assert (running["status"], running["step"]) == ("running", "100/100")
    assert running["last loss"] == f"{5.0 * 2.718281828 ** (-100 / 40) + 2.0 - 0.25:.4f}"
    assert running["heartbeat age"].endswith("s")
    assert live.loc["key_elementwise-s1", "status"] == "pending"


def test_leaderboard_shows_verdicts_cis_and_the_summary(app: AppTest, db_url: str) -> None:
    at = goto(app, "Leaderboard")
    db = results_db.open(db_url, readonly=True)
    lines = db.findings("demo").lines()
    assert [m.value for m in at.markdown[:len(lines)]] == [
        f"**{md(lines[0])}**", *(md(x) for x in lines[1:])]
    assert "variants better" in at.markdown[1].value
    table = at.dataframe[0].value
    # sorted by verdict: better first, then the baseline, then the undecided
    assert list(table["variant"]) == ["sdpa_elementwise", "sdpa_headwise", "baseline (baseline)",
                                      "value_elementwise", "sdpa_ns_sigmoid"]
    assert list(table["mean ± std"]) == ["9.100 ± 0.100", "9.700 ± 0.200", "10.200 ± 0.200",
                                         "9.900 ± 0.141", "11.200 ± 0.283"]
    assert list(table["n"]) == ["3", "3", "3", "2", "2"]
    api = db.leaderboard("demo").to_pandas().set_index("variant")
    for _, r in table.iterrows():  # the page shows the API's numbers, never its own
        v = r["variant"].removesuffix(" (baseline)")
        verdict = api.loc[v, "verdict"]
        # "needs >= k seeds" says what k is for; the seeds for the observed Δ beside it
        assert r["verdict"] == (f"{verdict} for a ±1% effect" if verdict.startswith("needs")
                                else verdict)
        if verdict.startswith("needs"):
            assert r["seeds for Δ"] == f">= {int(api.loc[v, 'seeds_observed'])}"
        if v != "baseline":
            lo, hi = api.loc[v, "ci_low_pct"], api.loc[v, "ci_high_pct"]
            assert r[DELTA_PCT] == f"{api.loc[v, 'delta_pct']:+.1f}% [{lo:+.1f}, {hi:+.1f}]"
            assert r[DELTA].startswith(("+", "-")) and "[" in r[DELTA]
    assert table["runs"][0].startswith("?page=Run+detail&sweep=demo&run=")
    # only the dimension columns that vary (no n_head, n_kv_head: constant in this sweep)
    assert "position" in table.columns and "n_head" not in table.columns
    dots = chart_data(at)[0]  # the Δ ± CI dot plot at the top: a dot per non-baseline row
    assert sorted({len(f) for f in dots}) == [1, 4, 10]  # zero rule, rows, each seed (3+3+2+2)
    spec = chart_specs(at)[0]
    # one colour per variant (the palette's), the verdict as a marker shape, never a hue
    colours = palette.colors(db.runs("demo")["variant"].unique(maintain_order=True).to_list(),
                             "baseline")
    assert variant_colors(spec) and variant_colors(spec).items() <= colours.items()
    assert '"shape"' in json.dumps(spec) and '"kind"' in json.dumps(spec)
    assert not at.warning  # every row has >= 2 seeds


def test_leaderboard_rank_sort_other_metric_and_filter(app: AppTest) -> None:
    at = goto(app, "Leaderboard")
    at.radio(key="lb_sort").set_value("rank").run()
    assert list(at.dataframe[0].value["rank"]) == ["1", "2", "3", "4", "5"]
    at.selectbox(key="lb_metric").set_value("bench/hellaswag").run()
    # benchmark accuracy: higher is better by default; hellaswag = 30 - ppl + seed
    assert at.toggle(key="lb_asc_bench/hellaswag").value is False
    assert list(at.dataframe[0].value["variant"])[0] == "sdpa_elementwise"
    at.multiselect(key="lb_f_gate_granularity").set_value(["headwise"]).run()
    assert list(at.dataframe[0].value["variant"]) == ["sdpa_headwise"]


def test_leaderboard_warns_about_single_seed_rows(app: AppTest) -> None:
    at = goto(app, "Leaderboard", sweep="demo-lr")
    warned = [w.value for w in at.warning if w.value.startswith("n = 1: no error bar")]
    # the baseline at 8e-3 has one finished seed (the other diverged): the rows compared with
    # it have no error bar; the baseline itself is the chart's reference, not such a row
    assert warned and "@ lr=8e-3" in warned[0] and "baseline @" not in warned[0], warned
    table = at.dataframe[0].value
    assert "sdpa_elementwise @ lr=4e-3" in list(table["variant"])


def test_effects_table_from_the_api(app: AppTest, db_url: str) -> None:
    at = goto(app, "Leaderboard")
    eff = at.dataframe[1].value
    api = results_db.open(db_url, readonly=True).effects("demo")
    assert list(eff["dimension"]) == api["dimension"].to_list()
    assert list(eff["verdict"]) == api["verdict"].to_list()


def test_lr_stability_page_only_for_lr_sweeps(app: AppTest, db_url: str) -> None:
    assert "LR stability" not in app.sidebar.radio(key="page").options  # demo: one LR
    at = goto(app, "LR stability", sweep="demo-lr")
    stab = results_db.open(db_url, readonly=True).stability("demo-lr")
    assert any(stab.rule in i.value and "tolerance 5%" in i.value for i in at.info)
    summary = at.dataframe[0].value.set_index("variant")
    # the baseline degrades past 2e-3 (> 5 % worse) and diverges at 8e-3; G1 holds to 8e-3
    assert summary.loc["baseline", "max stable LR"] == "2e-3"
    assert summary.loc["sdpa_elementwise", "max stable LR"] == "8e-3"
    assert len(chart_specs(at)) == 3 and all(chart_rows(d) > 0 for d in chart_data(at))
    # the stability answer with its uncertainty, in words, and the seeds' agreement per ladder
    assert stab.sentence and any(m.value == f"**{md(stab.sentence)}**" for m in at.markdown)
    assert summary.loc["sdpa_elementwise", "seeds agree"].endswith("of 2")
    # the change vs the baseline at each LR: the leaderboard's paired numbers
    deltas = at.dataframe[1].value
    assert set(deltas["variant"]) == {"sdpa_elementwise"} and len(deltas) >= 3
    assert all(d.endswith("]") or "no CI" in d or d == "–"
               for d in deltas["Δ% vs baseline [95% CI]"])
    at.select_slider(key="st_tol").set_value(0.2).run()  # a looser tolerance: stable further
    assert at.dataframe[0].value.set_index("variant").loc["baseline", "max stable LR"] == "4e-3"


def test_ablation_quality_table_with_paper_direction(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    assert any("Different scale" in w.value for w in at.warning)  # the caveat banner
    table = at.dataframe[0].value
    assert list(table["Variant"]) == ["baseline", "sdpa_elementwise", "sdpa_headwise",
                                      "value_elementwise", "sdpa_ns_sigmoid"]
    assert list(table["Method"]) == ["Baseline", "SDPA Elementwise G1", "SDPA Headwise G1",
                                     "v Elementwise G2", "SDPA Elementwise G1"]
    assert list(table["Act"]) == ["–", "sigmoid", "sigmoid", "sigmoid", "NS-sigmoid"]
    assert list(table["Score shape"]) == ["–", "n×q×dk", "n×q", "n×k×dk", "n×q×dk"]
    assert list(table["Added"]) == ["0", "8.2K", "512", "4.1K", "8.2K"]
    assert list(table["PPL"])[:2] == ["10.200 ± 0.200", "9.100 ± 0.100"]
    assert list(table["ΔPPL [95% CI]"])[0] == "–"
    assert list(table["ΔPPL [95% CI]"])[1].startswith("-10.8% [")
    # paper figures: Table 1 rows 1, 5, 10, 6 and Table 4 row 7 (NS-sigmoid); the paper's Δ
    # against its baseline 6.026 and whether ours points the same way
    assert list(table["Paper PPL (Δ%)"]) == ["6.026", "5.761 (-4.4%)", "5.792 (-3.9%)",
                                             "5.820 (-3.4%)", "5.900 (-2.1%)"]
    assert list(table["Agree"]) == ["–", "agree", "agree", "agree (noise)", "disagree (noise)"]
    assert list(table["Paper +M"]) == ["0", "201", "1.6", "25", "–"]
    at.toggle(key="ab_paper").set_value(False).run()
    assert not at.warning and "Paper PPL (Δ%)" not in at.dataframe[0].value.columns


def test_ablation_probes_and_stability_tables(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    at.radio(key="ab_kind").set_value("probes").run()
    probes = at.dataframe[0].value
    base = probes[probes["Variant"] == "baseline"].iloc[0]
    assert (base["Gate score"], base["M-Act"], base["F-Attn"]) == \
        ("–", "300 ± 0", "0.450 ± 0.000")
    assert base["Paper M-Act"] == "1053"
    at.radio(key="ab_kind").set_value("stability").run()
    stab = at.dataframe[0].value
    assert dict(zip(stab["Variant"], stab["Diverged"], strict=True)) == {
        "baseline": "0/3", "sdpa_elementwise": "0/3", "sdpa_headwise": "0/3",
        "value_elementwise": "0/2", "sdpa_ns_sigmoid": "1/3"}
    assert stab[stab["Variant"] == "baseline"].iloc[0]["Loss spikes at best LR"] == "0.333 ± 0.577"
    # one LR per variant: stable unless a seed diverged there (NS-sigmoid seed 0)
    assert dict(zip(stab["Variant"], stab["Max stable LR"], strict=True)) == {
        "baseline": "3e-3", "sdpa_elementwise": "3e-3", "sdpa_headwise": "3e-3",
        "value_elementwise": "3e-3", "sdpa_ns_sigmoid": "–"}
    assert not chart_specs(at)  # no stability view for a single-LR sweep


def test_ablation_quality_shows_benchmark_main_metrics_only(app: AppTest) -> None:
    table = goto(app, "Ablation tables").dataframe[0].value
    assert {"hellaswag", "arc_easy"} <= set(table.columns)
    assert not [c for c in table.columns if "/" in c]  # bench/<task>/<metric>: not columns
    rows = table.set_index("Variant")
    # hellaswag = 30 - ppl + seed: 20.0, 20.8, 21.6; arc_easy = 50 + 2 seed
    assert rows.loc["baseline", "hellaswag"] == "20.800 ± 0.800"
    assert rows.loc["baseline", "arc_easy"] == "52.000 ± 2.000"
    assert rows.loc["value_elementwise", "arc_easy"] == "51.000 ± 1.414"  # seed 2 failed


def test_ablation_long_context_table(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    at.radio(key="ab_kind").set_value("longctx").run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert list(table.columns) == [
        "Variant", "Method", "Act", "Score shape", "none 1x PPL", "none 2x PPL", "none 4x PPL",
        "yarn 2x PPL", "yarn 4x PPL", "yarn 2x retrieval", "yarn 4x retrieval", "n"]
    rows = table.set_index("Variant")
    # sample.longctx_summaries: none = ppl * f, yarn = ppl * (1 + 0.25 (f - 1)),
    # retrieval = 1/f + 0.1 seed; baseline ppl 10.0 10.2 10.4
    assert rows.loc["baseline", "none 2x PPL"] == "20.400 ± 0.400"
    assert rows.loc["baseline", "yarn 4x PPL"] == "17.850 ± 0.350"
    assert rows.loc["sdpa_elementwise", "none 1x PPL"] == "9.100 ± 0.100"
    assert rows.loc["baseline", "yarn 2x retrieval"] == "0.600 ± 0.100"
    # NS-sigmoid: seed 0 diverged (not averaged), seeds 1 and 2: 0.35, 0.45
    assert rows.loc["sdpa_ns_sigmoid", "yarn 4x retrieval"] == "0.400 ± 0.071"
    assert rows.loc["sdpa_ns_sigmoid", "n"] == "2"
    assert [b.proto.label for b in at.get("download_button")] == ["CSV", "Markdown", "LaTeX"]


def test_curves_page_defaults_bands_delta_and_single_points(app: AppTest) -> None:
    at = goto(app, "Curves", sweep="demo-lr")
    assert len(at.multiselect(key="cv_runs").value) == 16  # every started run, all LRs
    titles = [s.value for s in at.subheader]
    assert titles == ["training loss", "validation loss"]
    specs = chart_specs(at)
    assert len(specs) == 4  # loss, its Δ curve, val/loss, its Δ curve
    assert all(chart_rows(d) > 0 for d in chart_data(at))  # no empty chart
    # val/loss has one point per run: drawn as points, not an (invisible) line
    marks = json.dumps(specs[2])
    assert '"point"' in marks
    at.selectbox(key="cv_mode").set_value("each run").run()
    at.toggle(key="cv_log").set_value(True).run()
    spec = chart_specs(at)[0]
    assert '"log"' in json.dumps(spec)


def test_curves_marks_the_spike_and_tokens_axis(app: AppTest) -> None:
    at = goto(app, "Curves")
    assert "training loss — 1 spike(s) marked" in [s.value for s in at.subheader]
    at.radio(key="cv_x").set_value("tokens").run()
    spec = chart_specs(at)[0]
    assert "tokens" in json.dumps(spec["layer"][0]["encoding"]["x"])
    # sample configs: batch 16 x seq 128 (RunSpec defaults) = 2048 tokens per step
    xs = [x for f in chart_data(at)[0] if "x" in f.columns for x in f["x"]]
    assert max(xs) == pytest.approx(100 * 2048, rel=0.02)


def test_one_colour_per_variant_on_every_chart(app: AppTest, db_url: str) -> None:
    """Every chart colouring by variant gives each variant its sweep-wide colour, whatever rows
    it shows (curves, Δ curves, probes, stability panels, histograms)."""
    db = results_db.open(db_url, readonly=True)
    for sweep, pages in (("demo-lr", ("Curves", "Probes", "LR stability")),
                         ("demo", ("Curves", "Probes"))):
        order = [db.baseline(sweep)] + [v for v in dict.fromkeys(
            db.runs(sweep=sweep, with_config=False, columns=["variant"])["variant"].to_list())
            if v != db.baseline(sweep)]
        want = palette.colors(order, db.baseline(sweep))
        seen = 0
        for page in pages:
            at = goto(app, page, sweep=sweep)
            for spec, frames in zip(chart_specs(at), chart_data(at), strict=True):
                got = variant_colors(spec)
                if got:  # each variant it shows, in its sweep-wide colour
                    assert got.items() <= want.items(), (sweep, page)
                    shown = {v for f in frames if "variant" in f.columns for v in f["variant"]}
                    assert shown <= set(got), (sweep, page)
                    seen += 1
        assert seen >= 3, (sweep, seen)
    assert want["baseline"] == palette.BASELINE_COLOR


def test_probes_page_error_bars_log_scale_and_small_multiples(app: AppTest) -> None:
    at = goto(app, "Probes")
    titles = [s.value for s in at.subheader]
    assert titles[:3] == ["first-token attention (attention sink)",
                          "max |activation| (massive activations, log scale)", "mean gate score"]
    specs = chart_specs(at)
    assert len(specs) == 4  # 3 per-layer charts + the histogram small multiples
    assert '"errorbar"' in json.dumps(specs[0])
    assert '"log"' in json.dumps(specs[1]) and '"log"' not in json.dumps(specs[0])
    assert "facet" in specs[3]  # one panel per variant, not overlapping bars


def test_run_detail_shows_failed_attempt_traceback_and_config_diff(app: AppTest) -> None:
    at = goto(app, "Run detail")
    pick_run(at, "value_elementwise-s2")
    attempts = at.table[0].value
    assert list(attempts["status"]) == ["failed"]
    assert "injected failure" in attempts["error"][0]
    assert any("RuntimeError" in c.value for c in at.code)
    diff = next(t.value for t in at.table if "key" in t.value.columns)
    # a registered RunSpec's gate spells all six GateSpec fields; the baseline has no gate
    assert list(diff["key"]) == [f"model.gates.0.{f}" for f in (
        "activation", "combine", "granularity", "input_dependent", "position", "sharing")]
    assert list(diff["this run"]) == ['"sigmoid"', '"multiplicative"', '"elementwise"', "true",
                                      '"G2"', '"head_specific"']
    # its curve (train/loss up to the failure) is drawn, and its checkpoint directory
    assert len(chart_specs(at)) == 1 and chart_rows(chart_data(at)[0]) == sample.STEPS
    ckpt = next(t.value for t in at.table if "kind" in t.value.columns)
    assert list(ckpt["path"]) == ["runs/demo/value_elementwise-s2/ckpt"]


def _id(label: str) -> int:
    return int(label.split(" · ")[0])


def pick_run(at: AppTest, name: str) -> int:
    """Choose the run called ``name`` in Run detail (its variant first); returns its id."""
    at.selectbox(key="rd_variant").set_value(name.rsplit("-", 1)[0]).run()
    label = next(o for o in at.selectbox(key="rd_run").options if f" · {name} · " in o)
    at.selectbox(key="rd_run").set_value(_id(label)).run()
    return _id(label)


def _placed(url: str, tmp_path: Path, *names: str) -> None:
    """Give ``names`` a checkpoint dir in the layout a rerun accepts (the sample records
    ``runs/demo/NAME/ckpt``, which the rerun's checks refuse before anything is queued)."""
    db = results_db.open(url)
    for name in names:
        run = db.run(name)
        db.add_artifact(run.id, None, "checkpoint_dir",
                        str(tmp_path / "runs" / "demo" / name / "checkpoints"))


class _FakePopen:
    """Stands in for the detached `orchestrator rerun` process: a real one would train."""

    calls: list[list[str]] = []

    def __init__(self, cmd: list[str], **kwargs: object) -> None:
        _FakePopen.calls.append(list(cmd))
        self.pid = 4242


def test_rerun_button_requeues_the_run_through_the_orchestrator(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh DB (the button writes): the failed run goes back to pending via spawn_rerun,
    which starts `python -m orchestrator rerun ID --db URL` (intercepted here)."""
    import orchestrator.run.driver.rerun as rerun

    url = f"sqlite:///{tmp_path / 'rerun.db'}"
    ids = sample.fill(results_db.open(url))
    failed_id = ids["value_elementwise-s2"]
    _placed(url, tmp_path, "value_elementwise-s2")
    monkeypatch.setenv("GATESWEEP_DB", url)
    monkeypatch.chdir(tmp_path)  # spawn_rerun's log dir is ./runs/_logs
    monkeypatch.setattr(rerun.subprocess, "Popen", _FakePopen)
    _FakePopen.calls.clear()
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert pick_run(goto(at, "Run detail"), "value_elementwise-s2") == failed_id
    assert results_db.open(url).run(failed_id).status == "failed"
    at.button(key="rd_rerun").click().run()
    # first a confirmation; nothing written yet
    assert any("Start a new attempt" in w.value for w in at.warning)
    assert results_db.open(url).run(failed_id).status == "failed" and not _FakePopen.calls
    at.button(key="rd_rerun_no").click().run()
    assert not any("Start a new attempt" in w.value for w in at.warning)
    at.button(key="rd_rerun").click().run()
    at.button(key="rd_rerun_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    # the same page, without a reload, shows the new state and disables the button
    assert [s.value for s in at.success] == [
        f"Rerun of run {failed_id} (value_elementwise-s2) started: status pending."]
    assert at.button(key="rd_rerun").disabled
    assert results_db.open(url).run(failed_id).status == "pending"
    assert _FakePopen.calls == [[__import__("sys").executable, "-P", "-m", "orchestrator",
                                 "rerun", str(failed_id), "--db", url, "--storage",
                                 str((tmp_path / "runs").resolve())]]
    # the page re-reads the DB: the selector now shows the run as pending
    at.run()
    assert at.selectbox(key="rd_run").format_func(failed_id).endswith("· pending")


def test_rerun_of_a_finished_run_starts_from_step_0_by_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A succeeded run's last checkpoint is its final step, so a rerun that
    resumed it trained nothing. For a finished run the confirmation offers "start from step 0",
    checked, and the rerun is `--fresh`; a failed run resumes unless the box is ticked."""
    import orchestrator.run.driver.rerun as rerun

    url = f"sqlite:///{tmp_path / 'rerun.db'}"
    ids = sample.fill(results_db.open(url))
    done_id, failed_id = ids["baseline-s0"], ids["value_elementwise-s2"]
    assert results_db.open(url).run(done_id).status == "succeeded"
    _placed(url, tmp_path, "baseline-s0", "value_elementwise-s2")
    monkeypatch.setenv("GATESWEEP_DB", url)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(rerun.subprocess, "Popen", _FakePopen)
    _FakePopen.calls.clear()
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert pick_run(goto(at, "Run detail"), "baseline-s0") == done_id
    at.button(key="rd_rerun").click().run()
    assert at.checkbox(key=f"rd_fresh_{done_id}").value is True
    assert any("starts from step 0" in w.value for w in at.warning)
    at.button(key="rd_rerun_yes").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert _FakePopen.calls[-1][-1] == "--fresh", _FakePopen.calls
    assert pick_run(at, "value_elementwise-s2") == failed_id
    at.button(key="rd_rerun").click().run()
    assert at.checkbox(key=f"rd_fresh_{failed_id}").value is False
    assert any("resumes from the run's last checkpoint" in w.value for w in at.warning)
    at.button(key="rd_rerun_yes").click().run()
    assert "--fresh" not in _FakePopen.calls[-1], _FakePopen.calls


def test_rerun_button_disabled_for_live_runs(app: AppTest) -> None:
    at = goto(app, "Run detail")
    pick_run(at, "key_elementwise-s0")  # running
    assert at.button(key="rd_rerun").disabled


def test_empty_db_says_how_to_fill_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    results_db.open(url).close()  # the schema, no sweep
    monkeypatch.setenv("GATESWEEP_DB", url)
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert any("No sweeps" in i.value for i in at.info)
    goto(at, "Leaderboard")
    assert any("orchestrator submit" in i.value for i in at.info)


def test_unreadable_db_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATESWEEP_DB", f"sqlite:///{tmp_path}")  # a directory, not a DB file
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert [e.value for e in at.error][0].startswith("Cannot read the results DB sqlite:///")


def test_missing_db_is_never_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard opens read-only: a mistyped path is an error, not a new empty DB."""
    missing = tmp_path / "nope.db"
    monkeypatch.setenv("GATESWEEP_DB", f"sqlite:///{missing}")
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert "orchestrator submit" in at.error[0].value
    assert not missing.exists()


def test_run_detail_final_values(app: AppTest) -> None:
    at = goto(app, "Run detail")
    pick_run(at, "sdpa_elementwise-s1")
    values = next(t.value for t in at.table if "name" in t.value.columns)
    got = dict(zip(values["name"], values["value"], strict=True))
    assert (got["val/ppl"], got["params/gates"], got["probe/gate_score_mean"]) == \
        ("9.100", "8192", "0.120")


def test_run_detail_shows_each_attempts_provenance(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Provenance: what produced each attempt (code version, packages, device, CPU) and the
    DeepSpeed config used; a run from before provenance was recorded says so."""
    from tests.support.report_db import OTHER_COMMIT, provenance

    url = f"sqlite:///{tmp_path / 'prov.db'}"
    db = results_db.open(url)
    ids = sample.fill(db)
    run_id = ids["sdpa_elementwise-s1"]
    attempt = db.attempts(run_id)[-1]
    db.record_provenance(run_id, attempt.id, provenance(OTHER_COMMIT, torch="2.12.0+cpu"))
    monkeypatch.setenv("GATESWEEP_DB", url)
    at = AppTest.from_file(APP, default_timeout=30).run()
    pick_run(goto(at, "Run detail"), "sdpa_elementwise-s1")
    assert not at.exception, [e.value for e in at.exception]
    prov = next(t.value for t in at.table if "code" in t.value.columns)
    assert list(prov["code"]) == [OTHER_COMMIT[:12]] and list(prov["torch"]) == ["2.12.0+cpu"]
    assert list(prov["device"]) == ["cpu, 1 rank(s)"]
    assert any('"train_micro_batch_size_per_gpu": 8' in c.value for c in at.code)
    pick_run(at, "sdpa_elementwise-s0")
    assert any("Not recorded" in c.value for c in at.caption)


def test_leaderboard_says_when_the_runs_came_from_different_code(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, app: AppTest) -> None:
    """The page warns in results_db's sentence (db.code_mix) when the runs it ranks
    were trained by different code or packages, and not otherwise."""
    from tests.support import report_db

    assert not any("Mixed provenance" in w.value for w in goto(app, "Leaderboard").warning)
    url = report_db.build(f"sqlite:///{tmp_path / 'mixed.db'}", mixed=True)
    monkeypatch.setenv("GATESWEEP_DB", url)
    at = goto(AppTest.from_file(APP, default_timeout=60).run(), "Leaderboard")
    assert not at.exception, [e.value for e in at.exception]
    mix = results_db.open(url, readonly=True).code_mix(report_db.SWEEP).sentence
    assert mix is not None
    shown = [w.value for w in at.warning if "Mixed provenance" in w.value]
    assert len(shown) == 1 and "0123456789ab" in shown[0] and "2.12.0+cpu" in shown[0]
