"""The run-dimension rule, checked like the vocabulary rule: contract/dimensions.py is the one
table of run dimensions, the ORM's ``runs`` columns and their SQL types agree with it, the
registration derives exactly its columns from a config, every path names a RunSpec field, and
no product module spells a list of dimensions by hand (it derives the list from the table)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import BigInteger, Boolean, Float, Integer, String

from contract.config import RunSpec
from contract.dimensions import BY_COLUMN, COLUMNS, GATES, TABLE
from results_db.schema.dims import derive_dims
from results_db.schema.tables import DIM_COLUMNS, Run
from tests.test_architecture import MODULES, ROOT

SQL_TYPES = {"str": (String,), "int": (Integer, BigInteger), "float": (Float,),
             "bool": (Boolean,)}
# Hand lists that are a choice, not "the dimensions": module:name -> why
ALLOWED = {"results_db.read.frames:BASELINE_COLUMNS": "what the baseline rule reads"}
EXEMPT = ("results_db.migrations", "contract.dimensions")  # a migration records its revision
MIN_NAMES = 5  # a literal naming this many dimension columns is a hand-written list


# Every non-gate field set, so every path has a value to derive.
FULL = RunSpec.model_validate({
    "name": "full", "sweep": "s", "seed": 0,
    "model": {"preset": "tiny", "n_head": 4, "n_kv_head": 2, "nonlinearity": "silu",
              "d_ff": None, "moe": {"n_experts": 4, "d_expert": 32},
              "switch_head": {"n_experts": 2, "targets": "kv"}, "nsa": {"combine": "learned"},
              "norm_style": "sandwich", "clip_residual": 50.0, "qk_norm": True, "n_layer": 2,
              "d_model": 64, "gates": [{"position": "G2"}]},
    "train": {"lr": 0.01, "steps": 10, "warmup": 1}}).model_dump(mode="json")


def test_the_orm_has_a_typed_column_for_every_dimension() -> None:
    columns = Run.__table__.columns
    for d in TABLE:
        assert d.column in columns, d.column
        assert isinstance(columns[d.column].type, SQL_TYPES[d.kind]), (d.column, d.kind)
        assert columns[d.column].nullable, d.column  # NULL: ``null`` says what it means
    assert set(DIM_COLUMNS) == {*COLUMNS, "n_gates", "group_key", "lr_group_key"}


def test_registration_derives_exactly_the_table_from_a_config() -> None:
    dims = derive_dims(FULL)
    assert set(dims) == set(DIM_COLUMNS)
    for d in TABLE:
        if d.path == GATES:
            continue
        node = FULL
        for key in d.path.split("."):
            node = node[key]  # a KeyError: the path names no RunSpec field
        assert dims[d.column] == node, d.column
    assert dims["gate_position"] == "G2" and dims["n_gates"] == 1


def test_null_and_present_defaults() -> None:
    bare = derive_dims({"model": {"switch_head": {"n_experts": 2}}, "train": {}})
    assert bare["switch_head"] == BY_COLUMN["switch_head"].present  # on, targets defaulted
    assert all(bare[c] is None for c in COLUMNS if c != "switch_head"), bare
    assert derive_dims({})["switch_head"] is None  # off
    assert derive_dims({"model": {"nsa": {"window": 8}}})["nsa"] == "gated"  # NSA's own gate
    assert derive_dims({"model": {"nsa": None}})["nsa"] is None  # dense


def _lists(tree: ast.AST) -> list[tuple[str, int, int]]:
    """(assigned name, line, dimension names) of every tuple/list literal of strings."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                node.value, (ast.Tuple, ast.List)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = target.id if isinstance(target, ast.Name) else "?"
            names = [e.value for e in node.value.elts
                     if isinstance(e, ast.Constant) and e.value in BY_COLUMN]
            out.append((name, node.lineno, len(names)))
    return out


def test_no_product_module_spells_the_dimensions() -> None:
    found = []
    for module, path in MODULES.items():
        if module.startswith(EXEMPT):
            continue
        for name, line, n in _lists(ast.parse(Path(path).read_text())):
            if n >= MIN_NAMES and f"{module}:{name}" not in ALLOWED:
                found.append(f"{Path(path).relative_to(ROOT)}:{line}: {name} names {n} "
                             "dimensions (derive it from contract.dimensions.TABLE)")
    assert not found, "\n".join(found)


@pytest.mark.parametrize("source", [
    'X = ("gate_position", "lr", "n_head", "n_kv_head", "moe_experts")',
    'Y: tuple[str, ...] = ["steps", "d_model", "n_layer", "qk_norm", "norm_style", "id"]'])
def test_the_rule_flags_a_hand_list(source: str) -> None:
    assert any(n >= MIN_NAMES for _, _, n in _lists(ast.parse(source)))
