"""Expansion: variants x axes x seeds, gate shorthand, include/exclude, names, fingerprints."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.errors import SpecError
from orchestrator.sweep import expand as expand_mod
from orchestrator.sweep.expand import axis_label, expand
from orchestrator.sweep.spec import load_spec, loads_spec

DATA = Path(__file__).resolve().parents[1] / "data" / "specs"


def runs_of(text: str) -> list[expand_mod.ExpandedRun]:
    return expand(*loads_spec(text))


def test_grid_order_count_and_names() -> None:
    runs = expand(*load_spec(DATA / "good_grid.yaml"))
    # 3 variants x 2 positions x 3 lrs x 2 seeds = 36, minus headwise x G5 (6 rows)
    assert len(runs) == 30
    assert [r.name for r in runs[:4]] == ["baseline-G1-lr1e-3-s0", "baseline-G1-lr1e-3-s1",
                                          "baseline-G1-lr3.162e-3-s0", "baseline-G1-lr3.162e-3-s1"]
    assert not any(r.variant == "headwise" and r.spec.model.gates[0].position == "G5"
                   for r in runs)
    hw = next(r for r in runs if r.variant == "headwise")
    assert hw.spec.model.gates[0].granularity == "headwise"
    assert hw.axis_values == {"gate.position": "G1", "train.lr": 1e-3}
    kv = next(r for r in runs if r.variant == "nested_kv")
    assert kv.spec.model.n_kv_head == 4 and kv.spec.model.n_layer == 2  # preset kept
    assert {r.seed for r in runs} == {0, 1}
    assert all(r.spec.resources.cpus == 1 and r.spec.sweep == "grid-test" for r in runs)


def test_dotted_and_nested_spellings_have_the_same_fingerprint() -> None:
    base = "name: x\nbase: {model: {preset: tiny}}\nvariants:\n"
    a = runs_of(base + "  v: {model.n_kv_head: 4, train.lr: 1e-3}\n")[0]
    b = runs_of(base + "  v: {model: {n_kv_head: 4}, train: {lr: 0.001}}\n")[0]
    c = runs_of(base + "  v: {model.gates: [{position: G1}]}\n")[0]
    d = runs_of(base + "  v: {gate.position: G1}\n")[0]
    assert a.fingerprint == b.fingerprint
    assert c.fingerprint == d.fingerprint and c.fingerprint != a.fingerprint


def test_gate_shorthand_none_and_merge_with_base_gate() -> None:
    text = ("name: x\nbase: {model: {preset: tiny, gates: [{position: G1, activation: silu}]}}\n"
            "axes:\n  gate.position: [none, G2]\n")
    runs = runs_of(text)
    assert [r.name for r in runs] == ["base-nogate-s0", "base-G2-s0"]
    assert runs[0].spec.model.gates == ()
    assert runs[1].spec.model.gates[0].activation == "silu"  # merged onto the base gate


def test_include_keeps_only_matching_rows_and_list_values_mean_any() -> None:
    text = ("name: x\nbase: {model: {preset: tiny}}\naxes:\n  gate.position: [G1, G2, G3, G4]\n"
            "include:\n  - {gate.position: [G2, G4]}\n")
    assert [r.name for r in runs_of(text)] == ["base-G2-s0", "base-G4-s0"]


def test_exclude_can_drop_invalid_combinations_before_validation() -> None:
    text = ("name: x\nbase: {model: {preset: tiny}}\naxes:\n  gate.position: [G1, G5]\n"
            "  gate.granularity: [elementwise, headwise]\n")
    with pytest.raises(SpecError, match="not defined at position G5"):
        runs_of(text)
    runs = runs_of(text + "exclude:\n  - {gate.position: G5, gate.granularity: headwise}\n")
    assert [r.name for r in runs] == ["base-G1-elementwise-s0", "base-G1-headwise-s0",
                                      "base-G5-elementwise-s0"]


def test_identical_configs_are_reported() -> None:
    text = "name: x\nbase: {model: {preset: tiny}}\nvariants:\n  a: {}\n  b: {}\n"
    with pytest.raises(SpecError, match="runs 'a-s0' and 'b-s0' have the same configuration"):
        runs_of(text)


def test_expansion_count_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(expand_mod, "MAX_RUNS", 10)
    text = "name: x\nbase: {model: {preset: tiny}}\nseeds: [0, 1, 2, 3]\naxes:\n" \
           "  train.lr: [1e-3, 2e-3, 3e-3]\n"
    with pytest.raises(SpecError, match="expands to 12 runs"):
        runs_of(text)


def test_list_index_keys_address_existing_gates() -> None:
    base = "name: x\nbase: {model: {preset: tiny, gates: [{position: G1}]}}\nvariants:\n"
    run = runs_of(base + "  hw: {model.gates.0.granularity: headwise}\n")[0]
    assert run.spec.model.gates[0].granularity == "headwise"
    with pytest.raises(SpecError, match="has 1 element"):
        runs_of(base + "  bad: {model.gates.3.granularity: headwise}\n")


def test_sweep_name_and_seed_enter_the_fingerprint() -> None:
    one = runs_of("name: a\nbase: {model: {preset: tiny}}\nseeds: [0, 1]\n")
    two = runs_of("name: b\nbase: {model: {preset: tiny}}\nseeds: [0]\n")
    assert one[0].fingerprint != one[1].fingerprint
    assert one[0].fingerprint != two[0].fingerprint


@pytest.mark.parametrize("key,value,label", [
    ("train.lr", 0.003, "lr3e-3"), ("train.lr", 1.5e-4, "lr1.5e-4"),
    ("gate.position", "G2", "G2"), ("gate.position", "none", "nogate"),
    ("model.n_kv_head", 8, "n_kv_head8"), ("gate.input_dependent", False,
                                           "input_dependentFalse"),
])
def test_axis_labels(key: str, value: object, label: str) -> None:
    assert axis_label(key, value) == label
