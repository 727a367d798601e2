"""THE table of run dimensions: the config fields that describe a variant, one row each.

A dimension is a column of the results DB's ``runs`` table, derived from a run's stored config
at registration (results_db/schema/dims.py) so SQL and the frames can group and filter by it
without reading JSON. Everything that lists dimensions derives the list from this table: the
vocabulary (results_db.schema.vocab.DIMENSIONS / GATE_DIMENSIONS), the derivation, the frames'
column types (results_db/read/frames.py), the dashboard's run columns and colour pickers, the
CLI's ``runs`` columns. A rule test (tests/test_dimensions.py) checks the ORM's ``runs``
columns and their SQL types against it, and that no product module spells a list of them.

Adding a dimension: a row here, its mapped column in results_db/schema/tables.py and a
migration adding the column (old rows stay NULL: ``null`` says what that means) and recreating
the ``run_summary`` view with it (as 0009_summary_dims;
tests/results_db/test_migration_views.py). A gate field is derived by contract/gate_dims.py from
``model.gates`` instead of a path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from contract.config import NSAConfig
from contract.gate_dims import DEFAULT_SWITCH_TARGETS

DEFAULT_NSA_COMBINE: str = NSAConfig.model_fields["combine"].default

Kind = Literal["str", "int", "float", "bool"]
GATES = "model.gates"  # the path of every gate column: derived by contract/gate_dims.py


@dataclass(frozen=True)
class Dimension:
    column: str  # the runs table's column
    path: str  # dotted path in a stored RunSpec config (GATES: derived from the gate list)
    kind: Kind  # the column's type: SQL type, frame dtype, picker widget
    gate: bool  # what the paper's gate tables vary (a variant's change, never a swept axis)
    null: str  # what NULL means in a stored row
    present: Any = None  # the value when the path's parent block is set but the leaf is not

    def value(self, config: Mapping[str, Any]) -> Any:
        """The column's value in ``config`` (a RunSpec dump, fields possibly missing); not for
        gate columns (contract.gate_dims.gate_dims derives those)."""
        *parents, leaf = self.path.split(".")
        node: Any = config
        for key in parents:
            node = node.get(key) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            return None
        got = node.get(leaf)
        return self.present if got is None and self.present is not None else got


def _gate(column: str, kind: Kind = "str") -> Dimension:
    return Dimension(column, GATES, kind, gate=True, null="no gate")


TABLE: tuple[Dimension, ...] = (
    _gate("gate_position"), _gate("gate_granularity"), _gate("gate_sharing"),
    _gate("gate_combine"), _gate("gate_activation"), _gate("gate_input_dependent", "bool"),
    Dimension("nonlinearity", "model.nonlinearity", "str", gate=True,
              null="unset: the model's default (no extra non-linearity)"),
    Dimension("lr", "train.lr", "float", gate=False, null="unset: the train default"),
    Dimension("n_head", "model.n_head", "int", gate=False, null="unset: the preset's"),
    Dimension("n_kv_head", "model.n_kv_head", "int", gate=False,
              null="unset: equal to n_head"),
    Dimension("moe_experts", "model.moe.n_experts", "int", gate=False, null="dense (no MoE)"),
    # Switch-Head on: its targets, the config's default when not given
    Dimension("switch_head", "model.switch_head.targets", "str", gate=False, null="off",
              present=DEFAULT_SWITCH_TARGETS),
    # Native Sparse Attention on: how its branches combine, the config's default when not given
    Dimension("nsa", "model.nsa.combine", "str", gate=False, null="off: dense attention",
              present=DEFAULT_NSA_COMBINE),
    Dimension("norm_style", "model.norm_style", "str", gate=False,
              null="unset: the model's default"),
    Dimension("clip_residual", "model.clip_residual", "float", gate=False, null="no clipping"),
    Dimension("qk_norm", "model.qk_norm", "bool", gate=False, null="unset: off"),
    Dimension("n_layer", "model.n_layer", "int", gate=False, null="unset: the preset's"),
    Dimension("d_model", "model.d_model", "int", gate=False, null="unset: the preset's"),
    Dimension("steps", "train.steps", "int", gate=False, null="unset: the train default"),
)
BY_COLUMN: dict[str, Dimension] = {d.column: d for d in TABLE}
COLUMNS: tuple[str, ...] = tuple(d.column for d in TABLE)
GATE_COLUMNS: tuple[str, ...] = tuple(d.column for d in TABLE if d.gate)
