"""Two readability fixes on the Curves page (AppTest, real SQLite DB written through the
submit path and the writer API):

- the trainer's step-0 evaluation (the untrained model: val/ppl ~213 over bytes) squashed the
  final val/ppl and the Δ curve into the chart's bottom pixels: "From step" leaves it out by
  default (0 draws it), and "log y" also reaches the Δ chart (a symmetric log: Δ crosses 0);
- coloured by LR, an LR ladder had two legends titled "lr" (the colour's and the dash's).
"""

from __future__ import annotations

import json

import pytest

import results_db
from tests.support import dashboard_sample as sample
from tests.support import synthdb
from tests.support.apppage import chart_datasets, open_page

SWEEP = "cv-step0"
STEP0_PPL = 213.0
# val/ppl at steps 0, 100, 200 per (variant, seed)
VAL = {("baseline", 0): (STEP0_PPL, 12.0, 10.0), ("baseline", 1): (STEP0_PPL, 12.2, 10.2),
       ("sdpa_elementwise", 0): (STEP0_PPL, 11.0, 9.0),
       ("sdpa_elementwise", 1): (STEP0_PPL, 11.2, 9.2)}


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('curves') / 'r.db'}"
    with results_db.open(url) as db:
        spec = sample.sweep_spec(SWEEP, {"baseline": {}, "sdpa_elementwise": {
            "model.gates": [{"position": "G1"}]}}, 2)
        for r in synthdb.register(db, spec):
            vals = VAL[(r.run.variant, r.run.seed)]
            pts = [(s, "val/ppl", v) for s, v in zip((0, 100, 200), vals, strict=True)]
            pts += [(s, "train/loss", 5.0 - s / 100) for s in range(1, 201, 10)]
            synthdb.play(db, r.id, points=pts, summaries={"val/ppl": vals[-1]})
        sample.fill_lr(db)
    return url


def _val_ppl(at) -> tuple[list, list]:  # noqa: ANN001 - AppTest
    """(x of the val/ppl chart's points, x of its Δ chart's points)."""
    at.multiselect(key="cv_names").set_value(["val/ppl"]).run()
    assert not at.exception, [e.value for e in at.exception]
    val = max(chart_datasets(at, 0), key=len)
    delta = max(chart_datasets(at, 1), key=len)
    return sorted(set(val["x"])), sorted(set(delta["x"]))


def _y_scales(at, i: int) -> set:  # noqa: ANN001 - AppTest
    spec = json.loads(at.get("vega_lite_chart")[i].proto.spec)
    return {json.dumps(lay["encoding"]["y"].get("scale", {}), sort_keys=True)
            for lay in spec["layer"] if "scale" in lay["encoding"].get("y", {})}


def test_step0_evaluation_is_left_out_by_default_and_can_be_drawn(url: str) -> None:
    at = open_page("Curves", SWEEP)
    val_x, delta_x = _val_ppl(at)
    assert val_x == [100.0, 200.0] and delta_x == [100.0, 200.0]
    val = max(chart_datasets(at, 0), key=len)
    assert val["value"].max() < 20  # the trained values fill the y axis, not 213
    at.number_input(key="cv_from").set_value(0).run()
    val_x, delta_x = _val_ppl(at)
    assert val_x == [0.0, 100.0, 200.0] and delta_x == [0.0, 100.0, 200.0]
    assert max(chart_datasets(at, 0), key=len)["value"].max() == pytest.approx(STEP0_PPL)


def test_log_y_reaches_the_delta_chart(url: str) -> None:
    at = open_page("Curves", SWEEP)
    _val_ppl(at)
    at.toggle(key="cv_log").set_value(True).run()
    assert _y_scales(at, 0) == {'{"type": "log"}'}
    assert _y_scales(at, 1) == {'{"type": "symlog"}'}  # Δ crosses zero: no plain log


def _legend_titles(spec: dict) -> list[str]:
    """The titles of the legends a (layered) spec draws: one per distinct encoded channel
    with a legend (Vega-Lite merges a channel's legend over the layers)."""
    out: dict[tuple[str, str], str] = {}
    for lay in spec.get("layer", [spec]):
        for ch, enc in lay.get("encoding", {}).items():
            if ch in ("color", "strokeDash", "shape") and isinstance(enc, dict) \
                    and enc.get("legend", {}) is not None and "field" in enc:
                out[(ch, enc["field"])] = (enc.get("legend") or {}).get("title",
                                                                        enc.get("title"))
    return list(out.values())


def test_colour_by_lr_draws_one_lr_legend(url: str) -> None:
    at = open_page("Curves", sample.LR_SWEEP)
    at.selectbox(key="cv_color").set_value("lr").run()
    assert not at.exception, [e.value for e in at.exception]
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert _legend_titles(spec) == ["lr"]
    by_variant = open_page("Curves", sample.LR_SWEEP)  # coloured by variant: LR by dash
    spec = json.loads(by_variant.get("vega_lite_chart")[0].proto.spec)
    assert sorted(_legend_titles(spec), key=str) == sorted([None, "lr"], key=str)


def test_the_seed_band_is_named_and_choosable(url: str) -> None:
    """The band around each line's mean was ± 1 std labelled "mean ± band": it is picked by
    name (std, standard error, 95 % CI) and the caption says which is drawn. Two seeds whose
    final val/ppl differ by 0.2 (VAL): std 0.1414, standard error 0.1, 95 % t CI 12.71 x 0.1."""
    at = open_page("Curves", SWEEP)
    at.multiselect(key="cv_names").set_value(["val/ppl"]).run()
    widths = {}
    for mode in at.selectbox(key="cv_mode").options[:3]:
        at.selectbox(key="cv_mode").set_value(mode).run()
        assert not at.exception, [e.value for e in at.exception]
        val = max(chart_datasets(at, 0), key=len)
        last = val[(val["series"] == "baseline") & (val["x"] == 200.0)].iloc[0]
        widths[mode] = (last["hi"] - last["lo"]) / 2
        assert any(c.value.startswith("Shaded: ") for c in at.caption)
    assert list(widths.values()) == pytest.approx([0.2 / 2 ** 0.5, 0.1, 12.706 * 0.1],
                                                  rel=1e-3)
    assert "mean ± band" not in at.selectbox(key="cv_mode").options
