"""The dashboard's pure pieces: formatting, paper-style labels, the paper mapping, exports,
the spike marker, config diffs, status counts, and LR-axis rows (through the writer API)."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from markdown_it import MarkdownIt

import results_db
from dashboard import ablation, charts, curvedata, data, longctx, palette, paper
from dashboard.configdiff import config_diff
from dashboard.export import to_csv, to_latex, to_markdown
from dashboard.labels import activation_label, human_count, method_label, score_shape
from dashboard.mdtext import code, md
from dashboard.status import DONE_STATES, LIVE_STATES, STATES, status_table
from dashboard.tables import fmt_delta_ci, fmt_lr, fmt_mean_std, fmt_num, fmt_pct, row_labels
from tests.support import dashboard_sample as sample


def test_number_formatting() -> None:
    # one style per magnitude: no column mixes "5.34e-03" with "0.034" any more
    assert [fmt_num(x) for x in (1053.4, 5.7612, 0.0053, 0.034, 0.0, None, math.nan,
                                 math.inf, 3.1e-5)] == \
        ["1053", "5.761", "0.00530", "0.034", "0.000", "–", "–", "inf", "3.10e-05"]
    assert fmt_mean_std(9.1, 0.1) == "9.100 ± 0.100"
    assert fmt_mean_std(9.1, None) == "9.100"  # one seed: no spread to show
    assert fmt_pct(-10.784) == "-10.8%" and fmt_pct(2.44) == "+2.4%" and fmt_pct(None) == "–"
    assert fmt_delta_ci(-10.784, -12.06, -9.5) == "-10.8% [-12.1, -9.5]"
    assert fmt_delta_ci(-10.784, None, None) == "-10.8% (no CI)"  # n = 1
    # a 1e30 PPL: exponents, not a 33-digit percentage
    assert fmt_pct(1.485e31) == "+1.49e+31%" and fmt_pct(-99_999.0) == "-99999.0%"
    assert fmt_delta_ci(1.486e31, -4.806e31, 7.776e31) == "+1.49e+31% [-4.81e+31, +7.78e+31]"
    assert [fmt_lr(x) for x in (3e-3, 4e-4, 1.5e-3, None)] == ["3e-3", "4e-4", "1.5e-3", "–"]
    assert human_count(201_326_592) == "201.3M" and human_count(512) == "512"


@pytest.mark.parametrize(("dims", "method", "act", "shape"), [
    ({"gate_position": "G1"}, "SDPA Elementwise G1", "sigmoid", "n×q×dk"),
    ({"gate_position": "G1", "gate_granularity": "headwise"}, "SDPA Headwise G1", "sigmoid",
     "n×q"),
    ({"gate_position": "G2", "gate_sharing": "head_shared"}, "v Head-Shared G2", "sigmoid",
     "n×dk"),
    ({"gate_position": "G2", "gate_granularity": "headwise"}, "v Headwise G2", "sigmoid", "n×k"),
    ({"gate_position": "G1", "gate_combine": "additive", "gate_activation": "silu"},
     "SDPA Additive G1", "SiLU", "n×q×dk"),
    ({"gate_position": "G5"}, "Dense Output Elementwise G5", "sigmoid", "n×d_model"),
    ({"gate_position": "G1", "gate_input_dependent": False},
     "SDPA Input-Independent Elementwise G1", "sigmoid", "n×q×dk"),
    ({"gate_position": None, "nonlinearity": "rmsnorm"}, "SDPA RMSNorm", "RMSNorm", "–"),
    ({"gate_position": None}, "kv_heads_x2", "–", "–"),
    # Native Sparse Attention: the attention is named, with the G1 gate on top where there is one
    ({"gate_position": None, "nsa": "gated"}, "NSA gated", "–", "–"),
    ({"gate_position": "G1", "nsa": "equal"}, "NSA equal + SDPA Elementwise G1", "sigmoid",
     "n×q×dk"),
])
def test_paper_style_labels(dims: dict, method: str, act: str, shape: str) -> None:
    assert method_label(dims, "kv_heads_x2") == method
    assert activation_label(dims) == act
    assert score_shape(dims) == shape


def test_every_paper_mapping_entry_points_at_real_rows() -> None:
    for entry in paper.PAPER_ROWS:
        for table, keys in entry.rows.items():
            found = {r.get("#") or r["Method"] for r in paper.load_table(table)}
            assert set(keys) <= found, (entry, table)


def test_paper_matching_by_dims_and_by_name() -> None:
    g1 = {"gate_position": "G1"}
    assert paper.paper_value("anything", g1, "table1", "Avg PPL") == 5.761
    assert paper.paper_value("x", {**g1, "gate_activation": "silu"}, "table1", "Avg PPL") == 5.822
    assert paper.paper_value("x", {**g1, "gate_activation": "ns_sigmoid"}, "table4",
                             "M-Act") == 892
    assert paper.paper_value("kv_heads_x2", {}, "table1", "Added (M)") == 50
    assert paper.match("some_ungated_shape_change", {}) is None  # not mistaken for baseline
    assert paper.match("x", {"gate_position": "G1+G2"}) is None
    # Table 2: the baseline diverged at 8e-3 ("–"), the gated model did not
    assert paper.paper_max_stable_lr("baseline", {}) == pytest.approx(5.3e-3)
    assert paper.paper_max_stable_lr("x", g1) == pytest.approx(8e-3)
    assert paper.to_float("82.90 (−6.0)") == 82.9 and paper.to_float("–") is None


def test_exports_escape_and_round_trip() -> None:
    frame = pl.DataFrame({"Variant": ["sdpa_x|y"], "PPL": ["9.100 ± 0.100"], "Shape": ["n×q"]})
    table = to_markdown(frame)
    assert table.splitlines()[0] == "| Variant | PPL | Shape |"
    assert table.splitlines()[2] == r"| sdpa_x\|y | 9.100 ± 0.100 | n×q |"
    tex = to_latex(frame, caption="demo: 50% better")
    assert r"sdpa\_x|y & 9.100 $\pm$ 0.100 & n$\times$q \\" in tex
    assert r"\caption{demo: 50\% better}" in tex and r"\begin{tabular}{lcc}" in tex
    rows = list(csv.DictReader(io.StringIO(to_csv(pl.DataFrame({"a": [1.5], "b": ["x"]})))))
    assert rows == [{"a": "1.5", "b": "x"}]
    # a user's name with markup and a line break: one literal cell of a 3-column table
    odd = pl.DataFrame({"Variant": ["*b* `c` [l](x)\nnext"], "n": ["2"], "x": ["y"]})
    html = MarkdownIt("commonmark").enable("table").render(to_markdown(odd))
    assert "<td>*b* `c` [l](x) next</td>" in html and html.count("<td>") == 3


# Names users can type (variant, run and sweep names are free text in the writer API).
NASTY = ["gate | *bold* _it_ `tick` [link](x) <b>ü→ 门</b> # h", "__init__", "sdpa_elementwise",
         "[a][b] ![i](y) $x$ a&amp;b ~~s~~ :red[x]", "a\\*b", "``x`", "two\nlines", "`"]


@pytest.mark.parametrize("text", NASTY)
def test_markdown_text_reads_as_typed(text: str) -> None:
    """md() and code() put any text into Streamlit markdown literally (rendered by a
    CommonMark + GFM-tables parser, tags dropped, the text is the same)."""
    import html as html_mod
    import re

    def seen(markdown: str) -> str:
        out = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)
        return html_mod.unescape(re.sub(r"<[^>]+>", "", out)).strip()

    flat = " ".join(text.splitlines())
    assert seen(f"**{md(text)}** and") == f"{flat} and"
    assert seen(f"variant {code(text)}") == f"variant {flat}"
    assert md("sdpa_elementwise") == "sdpa_elementwise"  # intraword: left as typed


def test_spike_mask_flags_a_spike_not_noise_and_survives_nan() -> None:
    rng = np.random.default_rng(0)
    vals = 3.0 + 0.01 * rng.standard_normal(100)  # gentle noise: nothing flagged
    assert not charts.spike_mask(vals).any()
    vals[60] = 4.0
    vals[30] = np.nan
    mask = charts.spike_mask(vals)
    assert list(np.flatnonzero(mask)) == [60]


def test_parse_histogram_shapes() -> None:
    flat = {"edges": [0, 0.5, 1], "counts": [3, 4]}
    assert charts.parse_histogram(flat) == [("all", [0.0, 0.5, 1.0], [3.0, 4.0])]
    nested = {"layers": [flat, flat]}
    assert [h[0] for h in charts.parse_histogram(nested)] == ["layer_0", "layer_1"]
    assert charts.parse_histogram({"counts": [1]}) == []


def test_config_diff_lists_changed_leaves_only() -> None:
    base = {"name": "b", "seed": 0, "model": {"gates": [], "n_kv_head": 2}, "train": {"lr": 1}}
    this = {"name": "g", "seed": 1, "model": {"gates": [{"position": "G1"}], "n_kv_head": 4},
            "train": {"lr": 1}}
    assert config_diff(this, base) == [("model.gates.0.position", '"G1"', "–"),
                                       ("model.n_kv_head", "4", "2")]


def _sweep_status(**counts: int) -> pl.DataFrame:
    """One sweep's row as db.sweep_status() returns it (every state, total, done)."""
    row = {s: counts.get(s, 0) for s in STATES}
    done = sum(row[s] for s in DONE_STATES)
    return pl.DataFrame({"sweep": ["s"], **{k: [v] for k, v in row.items()},
                         "total": [sum(row.values())], "done": [done]})


def test_status_table_adds_groups_and_progress() -> None:
    a = status_table(_sweep_status(running=1, succeeded=3)).row(0, named=True)
    assert (a["running"], a["succeeded"], a["pending"], a["total"], a["finished"]) == \
        (1, 3, 0, 4, 3)
    assert a["progress"] == pytest.approx(0.75)
    assert status_table(_sweep_status()).row(0, named=True)["progress"] == 0.0


def test_status_groups_are_the_contracts_lost_is_waiting_not_finished() -> None:
    """A lost run needs a driver (submit/rerun): the contract (STATUS_GROUPS), `orchestrator
    status` and db.sweep_status count it as waiting, never finished; pending is not live."""
    from contract.states import status_group

    row = status_table(_sweep_status(succeeded=2, failed=1, lost=3, pending=4, running=5)
                       ).row(0, named=True)
    assert (row["finished"], row["total"]) == (3, 15)
    assert row["progress"] == pytest.approx(3 / 15)
    assert (row["done-ok"], row["done-bad"], row["live"], row["waiting"]) == (2, 1, 5, 7)
    for s in ("succeeded", "failed", "lost", "pending", "running", "diverged", "cancelled"):
        grp = status_group(s)
        assert (s in DONE_STATES) == grp.startswith("done"), s
        assert (s in LIVE_STATES) == (grp == "live"), s


def test_overview_data_tracks_live_runs(tmp_path: Path) -> None:
    """The overview fragment's data function (fragments with run_every don't run in AppTest)."""
    url = f"sqlite:///{tmp_path / 'live.db'}"
    db = results_db.open(url)
    ids = sample.fill(db)
    before = status_table(data.sweep_status(url)).row(0, named=True)
    assert (before["pending"], before["running"]) == (1, 1)
    att = db.start_attempt(ids["key_elementwise-s1"], host="h")
    db.finish_attempt(att.id, "succeeded")
    data.clear()  # the TTL (3 s) would do the same a little later
    after = status_table(data.sweep_status(url)).row(0, named=True)
    assert (after["pending"], after["running"], after["succeeded"]) == (0, 1, 14)


def test_row_labels_name_the_lr_wherever_the_frame_has_several() -> None:
    # a variant run at one LR carries it too: "sdpa" alone read as if tuned
    frame = pl.DataFrame({"variant": ["baseline", "baseline", "sdpa"],
                          "lr": [1e-3, 8e-3, 1e-3]})
    assert row_labels(frame).to_list() == ["baseline @ lr=1e-3", "baseline @ lr=8e-3",
                                           "sdpa @ lr=1e-3"]
    one = pl.DataFrame({"variant": ["baseline", "sdpa"], "lr": [1e-3, 1e-3]})
    assert row_labels(one).to_list() == ["baseline", "sdpa"]  # no LR axis: nothing to tell


def test_palette_is_stable_per_variant_whatever_a_chart_shows() -> None:
    variants = ["baseline", "sdpa", "value", "key"]
    full = palette.colors(variants, "baseline")
    assert full["baseline"] == palette.BASELINE_COLOR
    assert len(set(full.values())) == 4
    # a chart of a subset: only its variants in the scale, each with its sweep-wide colour
    scale = palette.scale(full, ["key", "sdpa"]).to_dict()
    assert dict(zip(scale["domain"], scale["range"], strict=True)) == \
        {"sdpa": full["sdpa"], "key": full["key"]}
    # the verdict is a marker shape, not a hue (a variant was red on one page, orange
    # on the next): every verdict kind has its own shape
    assert set(charts.VERDICT_SHAPES) == set(results_db.VERDICTS)
    assert not hasattr(palette, "VERDICT_COLORS")


def test_seed_mean_band_ema_and_delta_curve() -> None:
    pts = pl.DataFrame({"run_id": [1, 1, 2, 2, 3, 3], "variant": ["b", "b", "b", "b", "g", "g"],
                        "row": ["b", "b", "b", "b", "g", "g"], "x": [0.0, 10.0] * 3,
                        "value": [4.0, 2.0, 6.0, 4.0, 3.0, 1.0]})
    grouped = curvedata.seed_mean(pts, grid=2)
    b = grouped.filter(pl.col("series") == "b").sort("x")
    assert b["value"].to_list() == [5.0, 3.0]  # mean of the two seeds per bin
    assert b["lo"].to_list() == pytest.approx([5 - math.sqrt(2), 3 - math.sqrt(2)])
    g = grouped.filter(pl.col("series") == "g").sort("x")
    assert g["lo"].to_list() == g["value"].to_list()  # one run: no band
    diff = curvedata.delta_vs_baseline(grouped, {"g": "b"}).sort("x")
    assert diff["value"].to_list() == [-2.0, -2.0]
    smooth = curvedata.ema(pts.filter(pl.col("run_id") == 1), 0.5)
    # adjusted EMA, alpha 0.5: (2 + 0.5 * 4) / 1.5
    assert smooth.sort("x")["value"].to_list() == pytest.approx([4.0, 8 / 3])
    assert curvedata.ema(pts, 0.0).equals(pts)


def test_trainer_histogram_format_pools_layers() -> None:
    """trainer/evaluation.py writes {"step", "edges", "layers": {"layer_i": counts}}."""
    art = {"step": 100, "edges": [0.0, 0.5, 1.0], "layers": {"layer_0": [3, 1], "layer_1": [1, 3],
                                                             "layer_2": None}}
    hists = charts.parse_histogram(art)
    assert [h[0] for h in hists] == ["layer_0", "layer_1"]
    assert charts.combine_layers(hists, "g1") == [("g1", [0.0, 0.5, 1.0], [0.5, 0.5])]


def test_longctx_columns_order_and_parsing() -> None:
    names = ["longctx/yarn/8x/ppl", "longctx/yarn/2x/retrieval_acc", "longctx/ntk/2x/ppl",
             "longctx/none/1x/ppl", "longctx/yarn/2x/ppl", "longctx/yarn/2x/tail_ppl",
             "longctx/linear/16x/ppl", "longctx/linear/2x/ppl", "longctx/custom/2x/ppl",
             "longctx/yarn/x/ppl", "val/ppl", "bench/longctx"]
    cols = longctx.columns(names)
    assert [c.label for c in cols] == [
        "none 1x PPL", "linear 2x PPL", "linear 16x PPL", "ntk 2x PPL", "yarn 2x PPL",
        "yarn 8x PPL", "custom 2x PPL", "yarn 2x retrieval"]
    assert ablation.metric_names("longctx", names) == [c.metric for c in cols]
    assert ablation.metric_names("quality", ["val/ppl", "bench/mmlu", "bench/mmlu/acc",
                                             "bench/gsm8k/exact_match/strict"]) == \
        ["val/ppl", "bench/mmlu"]


def test_runs_frame_comes_from_db_runs_without_config(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    db = results_db.open(url)
    sample.fill(db)
    frame = data.runs(url, "demo")
    assert frame.columns == [*data.RUN_COLUMNS, "sweep"]  # no config JSON read
    assert frame.schema["gate_input_dependent"] == pl.Boolean
    full = db.runs(sweep="demo")
    assert frame.equals(full.select(*data.RUN_COLUMNS, "sweep"))
    assert data.runs(url, "no-such-sweep").height == 0
    # a sweep without long-context summaries: the table has no metric columns
    empty = ablation.build("longctx", db.ablation_table("demo", ["val/ppl"]), ["val/ppl"])
    assert [c for c in empty.display.columns if c.endswith(("PPL", "retrieval"))] == []


def test_added_params_of_a_non_gate_variant_is_its_extra_total() -> None:
    """kv_heads_x2 has no gate parameters but adds kv projections: the paper's +50M row."""
    from dashboard.tables import params_label

    runs = pl.DataFrame({"id": [1, 2, 3], "variant": ["baseline", "kv_heads_x2", "sdpa"],
                         "gate_position": [None, None, "G1"], "nonlinearity": ["none"] * 3,
                         "params_total": [1_000_000, 1_050_000, 1_201_000],
                         "params_gates": [0, 0, 201_000]})
    base = 1_000_000  # the baseline's total
    rows = {r["variant"]: r for r in runs.iter_rows(named=True)}
    assert params_label(rows["kv_heads_x2"], base) == params_label({"params_gates": 50_000})
    assert params_label(rows["sdpa"], base) == params_label({"params_gates": 201_000})
    assert params_label(rows["baseline"], base) == params_label({"params_gates": 0})


def test_huge_numbers_use_exponent_notation() -> None:
    from dashboard.tables import fmt_num

    assert fmt_num(70828182313633628160.0) == "7.08e+19"
    assert fmt_num(1053.0) == "1053"


def test_a_histogram_stored_as_json_text_is_parsed_within_bounds() -> None:
    """The DB hands an artifact's data back as its JSON text: parsed (bounded), not dropped;
    text that is not a histogram, or nests 5,000 deep, is no histogram."""
    text = '{"edges": [0.0, 0.5, 1.0], "counts": [3, 1]}'
    assert charts.parse_histogram(text) == [("all", [0.0, 0.5, 1.0], [3.0, 1.0])]
    assert charts.parse_histogram("[" * 5000 + "]" * 5000) == []
    assert charts.parse_histogram("{not json") == []
