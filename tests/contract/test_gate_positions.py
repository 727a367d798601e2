"""The gate positions table (contract/gate_positions.py) is the one spelling of G1..G5: the
config's Position type, its head rule, the score shapes, the order of a '+'-joined
gate_position and the dashboard's labels are read off it."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from contract import gate_positions
from contract.config import GateSpec, ModelConfig
from contract.gate_dims import gate_dims
from contract.gate_shapes import gate_heads, score_shape


def test_position_type_is_the_table() -> None:
    annotation = GateSpec.model_fields["position"].annotation
    assert typing.get_args(annotation) == gate_positions.NAMES == ("G1", "G2", "G3", "G4", "G5")
    assert GateSpec().position == gate_positions.DEFAULT == "G1"
    with pytest.raises(ValidationError, match="'G1', 'G2', 'G3', 'G4' or 'G5'"):
        GateSpec(position="G6")


@pytest.mark.parametrize("pos", gate_positions.TABLE, ids=lambda p: p.name)
def test_head_rule_follows_the_table(pos: gate_positions.GatePosition) -> None:
    shape = score_shape(GateSpec(position=pos.name), n_heads=4, head_dim=8, d_model=32)
    assert shape == ((4, 8) if pos.has_heads else (32,))
    assert gate_heads(pos.name, n_head=4, n_kv_head=2) == (2 if pos.heads == "kv" else 4)
    for field, value in (("granularity", "headwise"), ("sharing", "head_shared")):
        if pos.has_heads:
            GateSpec(position=pos.name, **{field: value})
        else:
            with pytest.raises(ValidationError, match=rf"gates\[\]\.{field}: '{value}' is not "
                               rf"defined at position {pos.name} \({pos.where} there are no "):
                GateSpec(position=pos.name, **{field: value})


def test_g5_keeps_its_message() -> None:
    """The wording users see did not change when the rule moved into the table."""
    with pytest.raises(ValidationError, match=r"'headwise' is not defined at position G5 "
                       r"\(after o_proj there are no heads\); use 'elementwise'"):
        GateSpec(position="G5", granularity="headwise")


def test_order_of_joined_positions_is_the_table_order() -> None:
    gates = [{"position": p} for p in reversed(gate_positions.NAMES)]
    assert gate_dims(gates)["gate_position"] == "+".join(gate_positions.NAMES)
    assert gate_positions.order("G9") == len(gate_positions.NAMES)  # unknown: last


def test_nonlinearity_control_sits_at_its_site() -> None:
    site = gate_positions.NONLINEARITY_SITE
    with pytest.raises(ValidationError, match=f"sits at {site}; it cannot be combined with a "
                       f"{site} gate"):
        ModelConfig(preset="tiny", nonlinearity="silu", gates=[{"position": site}])
    other = next(p for p in gate_positions.NAMES if p != site)
    assert ModelConfig(preset="tiny", nonlinearity="silu", gates=[{"position": other}])


def test_dashboard_labels_read_the_table() -> None:
    from dashboard.labels import method_label
    from dashboard.labels import score_shape as shape_label

    for pos in gate_positions.TABLE:
        dims = {"gate_position": pos.name}
        assert method_label(dims, "v") == f"{pos.site} Elementwise {pos.name}"
        assert shape_label(dims) == (f"n×{pos.heads_label}×dk" if pos.has_heads
                                     else "n×d_model")
    assert shape_label({"gate_position": "G2", "gate_granularity": "headwise"}) == "n×k"
