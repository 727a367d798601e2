"""Sweep files: parsing, validation errors with FILE:LINE KEY, bounds
(orchestrator/sweep/spec.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from contract.errors import SpecError
from contract.yamlsrc import MAX_DEPTH, load_text
from orchestrator.sweep.expand import expand
from orchestrator.sweep.spec import LrLadder, load_spec, loads_spec

ROOT = Path(__file__).resolve().parents[2]
SWEEPS = sorted((ROOT / "sweeps").rglob("*.yaml"))
DATA = Path(__file__).resolve().parents[1] / "data" / "specs"


def test_there_are_shipped_sweeps() -> None:
    names = {p.name for p in SWEEPS}
    assert {"gates.yaml", "smoke.yaml"} <= names


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_every_shipped_sweep_validates_and_expands_deterministically(path: Path) -> None:
    spec, src = load_spec(path)
    first = expand(spec, src)
    again = expand(*load_spec(path))
    assert first, f"{path} expands to no runs"
    assert [(r.name, r.fingerprint) for r in first] == [(r.name, r.fingerprint) for r in again]
    assert len({r.name for r in first}) == len(first)
    assert len({r.fingerprint for r in first}) == len(first)
    assert all(r.spec.sweep == spec.name for r in first)


# (file, line, key path fragment, message fragment)
BAD = [
    ("bad_unknown_key.yaml", 6, "retrys", "unknown key"),
    ("bad_enum.yaml", 8, "variants.sdpa.gate.granularity", "'elementwise' or 'headwise'"),
    ("bad_type.yaml", 5, "base.train.steps", "valid integer"),
    ("bad_duplicate_variant.yaml", 7, "variants.sdpa", "duplicate key (first defined on line 6)"),
    ("bad_empty_grid.yaml", 5, "axes.train.lr", "at least 1 item"),
    ("bad_dotted_key.yaml", 6, "variants.kv.model.n_kv_heads", "unknown key 'n_kv_heads'"),
    ("bad_combination.yaml", 7, "variants.dense_headwise", "not defined at position G5"),
    ("bad_yaml_syntax.yaml", 4, "", "invalid YAML"),
    ("bad_exclude_typo.yaml", 7, "exclude.0", "matches no run"),
]


@pytest.mark.parametrize("name,line,key,msg", BAD, ids=[b[0] for b in BAD])
def test_malformed_specs_name_file_line_and_key(name: str, line: int, key: str,
                                                msg: str) -> None:
    path = DATA / name
    with pytest.raises(SpecError) as info:
        expand(*load_spec(path))
    text = str(info.value)
    assert f"{path}:{line}:" in text, text
    assert key in text and msg in text, text


def test_lr_ladder_is_geometric_and_inclusive() -> None:
    vals = LrLadder(min=1e-4, max=1e-2, steps=5).values()
    assert vals == pytest.approx([1e-4, 3.162e-4, 1e-3, 3.162e-3, 1e-2], rel=1e-3)
    with pytest.raises(ValueError, match="must be below"):
        LrLadder(min=1e-2, max=1e-3, steps=3)


def test_scientific_notation_without_dot_is_a_float() -> None:
    spec, _ = loads_spec("name: x\nbase: {model: {preset: tiny}, train: {lr: 3e-3}}\n")
    assert spec.base["train"]["lr"] == pytest.approx(3e-3)


def test_variant_and_axis_may_not_set_the_same_key() -> None:
    text = ("name: x\nbase: {model: {preset: tiny}}\nvariants:\n  a: {train.lr: 1e-3}\n"
            "axes:\n  train.lr: [1e-3, 2e-3]\n")
    with pytest.raises(SpecError, match=r"<string>:4: variants.a: variant sets 'train.lr'"):
        loads_spec(text)


def test_gate_shorthand_conflicts_with_explicit_gates_but_crosses_other_gate_fields() -> None:
    clash = ("name: x\nbase: {model: {preset: tiny}}\nvariants:\n"
             "  a: {model.gates: [{position: G2}]}\naxes: {gate.position: [G1]}\n")
    with pytest.raises(SpecError, match="also sets"):
        loads_spec(clash)
    ok = ("name: x\nbase: {model: {preset: tiny}}\nvariants:\n"
          "  hw: {gate.granularity: headwise}\naxes: {gate.position: [G1, G2]}\n")
    runs = expand(*loads_spec(ok))
    assert [g.label for r in runs for g in r.spec.model.gates] == \
        ["G1/headwise/sigmoid", "G2/headwise/sigmoid"]


def test_seeds_twice_and_reserved_keys_are_errors() -> None:
    with pytest.raises(SpecError, match="seeds: give either seeds or axes.seed"):
        loads_spec("name: x\nbase: {model: {preset: tiny}}\nseeds: [0]\naxes: {seed: [1]}\n")
    with pytest.raises(SpecError, match="use the top-level 'seeds'"):
        loads_spec("name: x\nbase: {model: {preset: tiny}}\nvariants: {a: {seed: 3}}\n")


def test_bounds_depth_aliases_size() -> None:
    deep = "a: " + "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n"
    with pytest.raises(SpecError, match="nesting deeper"):
        load_text(deep)
    bomb = "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcde", "bcdef"))
    with pytest.raises(SpecError, match="more than"):
        load_text(bomb)
    with pytest.raises(SpecError, match="larger than"):
        load_text("a: '" + "x" * (1 << 20) + "'\n")


def test_empty_and_non_mapping_files() -> None:
    with pytest.raises(SpecError, match="empty"):
        loads_spec("")
    with pytest.raises(SpecError, match="expected a mapping"):
        loads_spec("- 1\n- 2\n")


def test_name_must_be_path_safe() -> None:
    with pytest.raises(SpecError, match=r"<string>:1: name: String should match pattern"):
        loads_spec("name: ../etc\nbase: {model: {preset: tiny}}\n")


# ---- bounded reading, numbers, one line per problem -----------------------------------------

@pytest.mark.parametrize("text", [
    "a: !!python/name:os.system x\n", "a: !!python/tuple [1, 2]\n", "a: !!map {b: 1}\n",
    "a: !!str 1\n", "a: !local x\n", "--- !!map\na: 1\n"])
def test_every_tag_is_refused_with_its_line(text: str) -> None:
    with pytest.raises(SpecError, match=r"<string>:\d+: .*YAML tag .* is not allowed"):
        load_text(text)


def test_depth_is_bounded_while_parsing_not_after() -> None:
    import sys

    deep = "a: " + "[" * (sys.getrecursionlimit() * 10) + "\n"  # not even closed: never read
    with pytest.raises(SpecError, match=r"<string>:1: a\.0\.0.*: nesting deeper than 32"):
        load_text(deep)


def test_a_problem_of_many_runs_is_one_line_with_its_count() -> None:
    text = ("name: x\nbase:\n  model: {preset: tiny}\n  train: {stepz: 3}\n"
            "variants: {a: {}, b: {}, c: {}}\naxes: {train.lr: [1e-3, 2e-3]}\nseeds: [0, 1]\n")
    with pytest.raises(SpecError) as info:
        expand(*loads_spec(text))
    assert len(info.value.issues) == 1
    assert str(info.value.issues[0]).startswith("<string>:4: base.train.stepz: unknown key")
    assert "(in 12 runs, e.g. a-lr1e-3-s0)" in str(info.value)


@pytest.mark.parametrize("grid,key,line", [
    ("axes: {train.lr: [1e-3, 2e-3]}\nseeds: [" + ", ".join(map(str, range(1000))) + "]\n",
     "seeds", 5),
    ("axes: {train.warmup: [" + ", ".join(map(str, range(1000))) + "]}\nseeds: [0, 1, 2]\n",
     "axes.train.warmup", 4),
    ("lr_ladder: {min: 1e-4, max: 1e-2, steps: 1000}\nseeds: [0, 1, 2, 3, 4, 5]\n",
     "lr_ladder", 4)])
def test_the_run_limit_names_the_key_that_drives_it(grid: str, key: str, line: int) -> None:
    text = "name: x\nbase: {model: {preset: tiny}}\n" + "variants: {a: {}, b: {}, c: {}}\n" + grid
    with pytest.raises(SpecError, match=rf"<string>:{line}: {key.split('.')[0]}.*more than "
                                        rf"5000; reduce {key}"):
        expand(*loads_spec(text))


@pytest.mark.parametrize("base,msg", [
    ("train: {lr: .inf}", "finite number"), ("train: {lr: .nan}", "finite number"),
    ("train: {steps: yes}", "got a boolean"), ("train: {steps: 1e400}", "finite number"),
    ("train: {steps: 100000000000000000000000}", "64-bit integer"),
    ("model: {preset: tiny, rope_base: -.inf}", "finite number"),
    ("resources: {cpus: .inf}", "finite number")])
def test_non_finite_boolean_and_oversized_numbers_are_refused(base: str, msg: str) -> None:
    model = "" if "model:" in base else "model: {preset: tiny}, "
    with pytest.raises(SpecError, match=msg):
        expand(*loads_spec(f"name: x\nbase: {{{model}{base}}}\n"))
