"""The ``gate.*`` shorthand has one owner (orchestrator/sweep/gate_shorthand.py); it was spelled in
8 places over keys.py, expand.py and spec.py (prefix, no-gate values, merge rule, default
position)."""

from __future__ import annotations

import ast
from pathlib import Path

from orchestrator.sweep import gate_shorthand
from orchestrator.sweep.expand import expand
from orchestrator.sweep.spec import loads_spec

ROOT = Path(__file__).resolve().parents[2]
SWEEP = """name: g
base: {model: {preset: tiny}, train: {steps: 4, warmup: 1}}
variants:
  none: {gate.position: none}
  g2: {gate.position: G2, gate.activation: silu}
  headwise: {gate.granularity: headwise}
exclude: [{gate.granularity: headwise, train.lr: 1e-3}]
axes: {train.lr: [1e-3, 3e-3]}
"""


def test_the_shorthand_expands_merges_and_filters() -> None:
    runs = {r.name: r for r in expand(*loads_spec(SWEEP + "include: [{gate.position: null}, "
                                                            "{gate.activation: silu}]\n"))}
    assert sorted(runs) == ["g2-lr1e-3-s0", "g2-lr3e-3-s0", "none-lr1e-3-s0", "none-lr3e-3-s0"]
    assert runs["none-lr1e-3-s0"].spec.model.gates == ()
    (g,) = runs["g2-lr3e-3-s0"].spec.model.gates
    assert (g.position, g.activation, g.combine) == ("G2", "silu", "multiplicative")


def test_an_unset_position_is_the_gatespec_default() -> None:
    runs = expand(*loads_spec(SWEEP))
    headwise = [r for r in runs if r.variant == "headwise"]
    assert [(r.name, r.spec.model.gates[0].position) for r in headwise] == \
        [("headwise-lr3e-3-s0", "G1")]


def test_only_the_owner_spells_the_shorthand() -> None:
    """No string constant 'gate' / 'gate.<field>' and no no-gate tuple outside the owner."""
    owner = ROOT / "orchestrator" / "sweep" / "gate_shorthand.py"
    found = []
    for path in sorted((ROOT / "orchestrator").rglob("*.py")):
        if path == owner:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    id(node) not in docs and \
                    (node.value == gate_shorthand.PREFIX
                     or node.value.startswith(gate_shorthand.PREFIX + ".")):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, found
