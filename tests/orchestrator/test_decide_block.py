"""Hostile ``decide:`` blocks (orchestrator/sweep/decide.py): each is one located error before
anything is registered. A block over a sweep with nothing to compare (only the baseline left)
and an absolute margin so wide that every difference would be "within noise" used to
validate."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.errors import SpecError
from orchestrator.sweep.decide import MAX_ABS_MARGIN
from orchestrator.sweep.plan import make_plan

HEAD = """name: adapt
base: {model: {preset: tiny}, train: {steps: 40}}
variants:
  baseline: {}
"""
GATED = "  gated: {model.gates: [{position: G1}]}\n"


def _error(tmp_path: Path, text: str) -> SpecError:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        make_plan(path)
    assert len(info.value.issues) == 1, info.value
    return info.value


def test_only_the_baseline_is_nothing_to_decide(tmp_path: Path) -> None:
    err = _error(tmp_path, HEAD + "decide: {margin: 0.02}\n")
    assert str(err).endswith("sweep.yaml:5: decide: the sweep has only the variant 'baseline' "
                             "(after include/exclude): nothing to compare with the baseline, "
                             "so nothing to decide; add a variant or remove decide")


def test_a_variant_excluded_away_leaves_nothing_to_decide(tmp_path: Path) -> None:
    text = HEAD + GATED + "exclude: [{variant: gated}]\ndecide: {}\n"
    assert "sweep.yaml:7: decide: the sweep has only the variant 'baseline'" in str(
        _error(tmp_path, text))


@pytest.mark.parametrize("margin", ["1e308", "1.0e7"])
def test_an_absolute_margin_beyond_the_bound_is_located(tmp_path: Path, margin: str) -> None:
    text = HEAD + GATED + f"decide: {{margin: {margin}, relative: false}}\n"
    msg = str(_error(tmp_path, text))
    assert "sweep.yaml:6: decide: decide.margin: an absolute margin is in val/ppl's own units " \
           f"and at most {MAX_ABS_MARGIN:g}, got {float(margin):g}" in msg


def test_sensible_blocks_still_validate(tmp_path: Path) -> None:
    for block in ("decide: {margin: 0.5, relative: false}", "decide: {margin: 0.02}",
                  f"decide: {{margin: {MAX_ABS_MARGIN:g}, relative: false}}"):
        path = tmp_path / "sweep.yaml"
        path.write_text(HEAD + GATED + block + "\n")
        plan = make_plan(path)
        assert plan.spec.decide is not None
        assert {r.variant for r in plan.runs} == {"baseline", "gated"}
