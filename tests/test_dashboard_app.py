"""Each dashboard page under streamlit's AppTest, against a DB written by results_db's real
writer API (dashboard/sample.py: ensure_sweep, register_runs, start_attempt, log_metrics,
log_summaries, add_artifact, finish_attempt). Expected numbers are worked out by hand from
dashboard.sample.SAMPLE:

    baseline          10.0 10.2 10.4 -> 10.200 ± 0.200 (n 3)
    sdpa_elementwise   9.0  9.1  9.2 ->  9.100 ± 0.100 (n 3), Δ -1.100 (-10.8%)
    sdpa_headwise      9.5  9.7  9.9 ->  9.700 ± 0.200 (n 3), Δ -0.500 (-4.9%)
    value_elementwise  9.8 10.0 fail ->  9.900 ± 0.141 (n 2), Δ -0.300 (-2.9%)
    sdpa_ns_sigmoid   div. 11.0 11.4 -> 11.200 ± 0.283 (n 2), Δ +1.000 (+9.8%)
    key_elementwise   running, pending (no results)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import results_db
from dashboard import sample

APP = str(Path(__file__).resolve().parents[1] / "dashboard" / "app.py")


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('dash') / 'results.db'}"
    db = results_db.open(url)
    sample.fill(db)
    db.close()
    return url


@pytest.fixture
def app(db_url: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("GATESWEEP_DB", db_url)
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def goto(at: AppTest, page: str) -> AppTest:
    at.sidebar.radio(key="page").set_value(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_overview_counts_and_progress(app: AppTest) -> None:
    frame = app.dataframe[0].value
    row = frame[frame["sweep"] == "demo"].iloc[0]
    assert (row["succeeded"], row["failed"], row["diverged"]) == (13, 1, 1)
    assert (row["running"], row["pending"], row["total"]) == (1, 1, 17)
    assert row["progress"] == pytest.approx(15 / 17)


def test_leaderboard_ranks_with_mean_std_and_delta(app: AppTest) -> None:
    table = goto(app, "Leaderboard").table[0].value
    assert list(table["variant"]) == ["sdpa_elementwise", "sdpa_headwise", "value_elementwise",
                                      "baseline (baseline)", "sdpa_ns_sigmoid"]
    assert list(table["rank"]) == ["1", "2", "3", "4", "5"]
    assert list(table["mean ± std"]) == ["9.100 ± 0.100", "9.700 ± 0.200", "9.900 ± 0.141",
                                         "10.200 ± 0.200", "11.200 ± 0.283"]
    assert list(table["n"]) == ["3", "3", "2", "3", "2"]
    assert list(table["Δ vs baseline"]) == ["-1.100 (-10.8%)", "-0.500 (-4.9%)",
                                            "-0.300 (-2.9%)", "+0.000 (+0.0%)", "+1.000 (+9.8%)"]
    assert list(table["gate_position"]) == ["G1", "G1", "G2", "–", "G1"]
    assert list(table["gate_input_dependent"]) == ["True", "True", "True", "–", "True"]


def test_leaderboard_other_metric_descending_and_filter(app: AppTest) -> None:
    at = goto(app, "Leaderboard")
    at.selectbox(key="lb_metric").set_value("bench/hellaswag").run()
    # benchmark accuracy: higher is better by default; hellaswag = 30 - ppl + seed
    assert at.toggle(key="lb_asc_bench/hellaswag").value is False
    assert list(at.table[0].value["variant"])[0] == "sdpa_elementwise"
    at.multiselect(key="lb_f_gate_granularity").set_value(["headwise"]).run()
    table = at.table[0].value
    assert list(table["variant"]) == ["sdpa_headwise"]
    # the delta stays against the (now hidden) baseline: 21.3 - 20.8
    assert list(table["Δ vs baseline"]) == ["+0.500 (+2.4%)"]
    at.multiselect(key="lb_f_gate_granularity").set_value([]).run()
    at.multiselect(key="lb_f_gate_position").set_value(["–", "G2"]).run()  # ungated + G2
    assert list(at.table[0].value["variant"]) == ["baseline (baseline)", "value_elementwise"]


def test_leaderboard_state_filter_includes_diverged(app: AppTest) -> None:
    at = goto(app, "Leaderboard")
    at.multiselect(key="lb_states").set_value(["succeeded", "diverged"]).run()
    table = at.table[0].value
    # the diverged seed has no finite PPL (stored as NULL), so n stays 2
    row = table[table["variant"] == "sdpa_ns_sigmoid"].iloc[0]
    assert (row["mean ± std"], row["n"]) == ("11.200 ± 0.283", "2")


def test_ablation_quality_table_rows_and_paper_column(app: AppTest) -> None:
    table = goto(app, "Ablation tables").table[0].value
    assert list(table["Variant"]) == ["baseline", "sdpa_elementwise", "sdpa_headwise",
                                      "value_elementwise", "sdpa_ns_sigmoid"]
    assert list(table["Method"]) == ["Baseline", "SDPA Elementwise G1", "SDPA Headwise G1",
                                     "v Elementwise G2", "SDPA Elementwise G1"]
    assert list(table["Act"]) == ["–", "sigmoid", "sigmoid", "sigmoid", "NS-sigmoid"]
    assert list(table["Score shape"]) == ["–", "n×q×dk", "n×q", "n×k×dk", "n×q×dk"]
    assert list(table["Added"]) == ["0", "8.2K", "512", "4.1K", "8.2K"]
    assert list(table["PPL"])[:2] == ["10.200 ± 0.200", "9.100 ± 0.100"]
    assert list(table["ΔPPL"])[1] == "-1.100 (-10.8%)"
    # paper figures: Table 1 rows 1, 5, 10, 6 and Table 4 row 7 (NS-sigmoid)
    assert list(table["Paper PPL"]) == ["6.026", "5.761", "5.792", "5.820", "5.900"]
    assert list(table["Paper Added (M)"]) == ["0", "201", "1.6", "25", "–"]


def test_ablation_probes_and_stability_tables(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    at.radio(key="ab_kind").set_value("probes").run()
    probes = at.table[0].value
    base = probes[probes["Variant"] == "baseline"].iloc[0]
    assert (base["Gate score"], base["M-Act"], base["F-Attn"]) == \
        ("–", "300 ± 0.000", "0.450 ± 0.000")
    assert base["Paper M-Act"] == "1053"
    at.radio(key="ab_kind").set_value("stability").run()
    stab = at.table[0].value
    assert dict(zip(stab["Variant"], stab["Diverged"], strict=True)) == {
        "baseline": "0/3", "sdpa_elementwise": "0/3", "sdpa_headwise": "0/3",
        "value_elementwise": "0/2", "sdpa_ns_sigmoid": "1/3"}
    assert stab[stab["Variant"] == "baseline"].iloc[0]["Loss spikes"] == "0.333 ± 0.577"


def test_ablation_quality_shows_benchmark_main_metrics_only(app: AppTest) -> None:
    table = goto(app, "Ablation tables").table[0].value
    assert {"hellaswag", "arc_easy"} <= set(table.columns)
    assert not [c for c in table.columns if "/" in c]  # bench/<task>/<metric>: not columns
    rows = table.set_index("Variant")
    # hellaswag = 30 - ppl + seed: 20.0, 20.8, 21.6; arc_easy = 50 + 2 seed
    assert rows.loc["baseline", "hellaswag"] == "20.800 ± 0.800"
    assert rows.loc["baseline", "arc_easy"] == "52.000 ± 2.000"
    assert rows.loc["value_elementwise", "arc_easy"] == "51.000 ± 1.414"  # seed 2 failed


def test_ablation_stability_has_max_stable_lr(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    at.radio(key="ab_kind").set_value("stability").run()
    assert not at.warning  # db.max_stable_lr answered
    stab = at.table[0].value.set_index("Variant")
    # one LR per variant: stable unless a seed diverged there (NS-sigmoid seed 0)
    assert stab["Max stable LR"].to_dict() == {
        "baseline": "3.00e-03", "sdpa_elementwise": "3.00e-03", "sdpa_headwise": "3.00e-03",
        "value_elementwise": "3.00e-03", "sdpa_ns_sigmoid": "–"}


def test_ablation_long_context_table(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    at.radio(key="ab_kind").set_value("longctx").run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.table[0].value
    assert list(table.columns) == [
        "Variant", "Method", "Act", "Score shape", "none 1x PPL", "none 2x PPL", "none 4x PPL",
        "yarn 2x PPL", "yarn 4x PPL", "yarn 2x retrieval", "yarn 4x retrieval", "n"]
    assert list(table["Variant"]) == ["baseline", "sdpa_elementwise", "sdpa_headwise",
                                      "value_elementwise", "sdpa_ns_sigmoid"]
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


def test_ablation_downloads(app: AppTest) -> None:
    at = goto(app, "Ablation tables")
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["CSV", "Markdown", "LaTeX"]


def test_curves_page_charts_selected_runs(app: AppTest) -> None:
    at = goto(app, "Curves")
    assert len(at.multiselect(key="cv_runs").value) == 6
    charts = at.get("vega_lite_chart")
    assert len(charts) == 3  # loss, lr, grad norm
    titles = [s.value for s in at.subheader]
    assert "loss — 1 spike(s) marked" in titles  # baseline seed 0, step 50


def test_probes_page_per_layer_and_histograms(app: AppTest) -> None:
    at = goto(app, "Probes")
    titles = [s.value for s in at.subheader]
    assert titles[:3] == ["first-token attention (attention sink)",
                          "max |activation| (massive activations)", "mean gate score"]
    # 3 per-layer charts + the gate histogram chart
    assert len(at.get("vega_lite_chart")) == 4


def test_run_detail_shows_failed_attempt_traceback_and_config_diff(app: AppTest) -> None:
    at = goto(app, "Run detail")
    failed = next(o for o in at.selectbox(key="rd_run").options if "value_elementwise-s2" in o)
    at.selectbox(key="rd_run").set_value(_id(failed)).run()
    attempts = at.table[0].value
    assert list(attempts["status"]) == ["failed"]
    assert "injected failure" in attempts["error"][0]
    assert any("RuntimeError" in c.value for c in at.code)
    diff = at.table[1].value
    assert list(diff["key"]) == ["model.gates.0.position"]
    assert list(diff["this run"]) == ['"G2"']


def _id(label: str) -> int:
    return int(label.split(" · ")[0])


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
    import orchestrator.rerun as rerun

    url = f"sqlite:///{tmp_path / 'rerun.db'}"
    ids = sample.fill(results_db.open(url))
    failed_id = ids["value_elementwise-s2"]
    monkeypatch.setenv("GATESWEEP_DB", url)
    monkeypatch.chdir(tmp_path)  # spawn_rerun's log dir is ./runs/_logs
    monkeypatch.setattr(rerun.subprocess, "Popen", _FakePopen)
    _FakePopen.calls.clear()
    at = AppTest.from_file(APP, default_timeout=30).run()
    goto(at, "Run detail").selectbox(key="rd_run").set_value(failed_id).run()
    assert results_db.open(url).run(failed_id).status == "failed"
    at.button(key="rd_rerun").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert [s.value for s in at.success] == [
        f"Rerun of run {failed_id} (value_elementwise-s2) started."]
    assert results_db.open(url).run(failed_id).status == "pending"
    assert _FakePopen.calls == [[__import__("sys").executable, "-m", "orchestrator", "rerun",
                                 str(failed_id), "--db", url]]
    # the page re-reads the DB: the selector now shows the run as pending
    at.run()
    assert at.selectbox(key="rd_run").format_func(failed_id).endswith("· pending")


def test_rerun_button_disabled_for_live_runs(app: AppTest) -> None:
    at = goto(app, "Run detail")
    running = next(o for o in at.selectbox(key="rd_run").options if o.endswith("· running"))
    at.selectbox(key="rd_run").set_value(_id(running)).run()
    assert at.button(key="rd_rerun").disabled


def test_empty_db_says_how_to_fill_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
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


def test_run_detail_final_values(app: AppTest) -> None:
    at = goto(app, "Run detail")
    label = next(o for o in at.selectbox(key="rd_run").options if "sdpa_elementwise-s1" in o)
    at.selectbox(key="rd_run").set_value(_id(label)).run()
    values = next(t.value for t in at.table if "name" in t.value.columns)
    got = dict(zip(values["name"], values["value"], strict=True))
    assert (got["val/ppl"], got["params/gates"], got["probe/gate_score_mean"]) == \
        ("9.100", "8192", "0.120")
