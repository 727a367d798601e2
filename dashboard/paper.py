"""The paper's reference figures and which of our variants each row corresponds to.

The CSVs in ``paper_data/`` are copied from the paper (see paper_data/README.md). ``PAPER_ROWS``
is the mapping, as data: an entry matches a variant by its NAME (for variants that are not a
gate, e.g. "kv_heads_x2") or by its gate DIMENSIONS (missing dims = the paper's defaults), and
names the rows ("#" column) of each paper table it reproduces. Extend it (issue 7) by adding
entries, not code.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from dashboard.labels import normalize_dims

PAPER_DIR = Path(__file__).parent / "paper_data"
TABLE_FILES: dict[str, str] = {
    "table1": "table1_moe_gating_variants.csv",
    "table2": "table2_dense.csv",
    "table3": "table3_nonlinearity.csv",
    "table4": "table4_gate_sink_activation.csv",
    "table6": "table6_switch_heads.csv",
}
MISSING = "–"  # the paper's "not applicable / diverged" mark


@dataclass(frozen=True)
class PaperMatch:
    """One of our variants -> rows of the paper's tables (table -> "#" ids, or Method names)."""

    rows: Mapping[str, tuple[str, ...]]
    variants: tuple[str, ...] = ()  # match by variant name (exact)
    dims: Mapping[str, Any] = field(default_factory=dict)  # match by gate dims (+ defaults)


def _g(**dims: Any) -> dict[str, Any]:
    return dims


PAPER_ROWS: tuple[PaperMatch, ...] = (
    PaperMatch({"table1": ("1",), "table2": ("11", "12"), "table3": ("1",), "table4": ("1",),
                "table6": ("Baseline (q32, kv4)",)}, variants=("baseline",)),
    PaperMatch({"table1": ("2",)}, variants=("kv_heads_x2", "k8", "kv_heads_8")),
    PaperMatch({"table1": ("3",)}, variants=("q_heads_x1.5", "q48", "q_heads_48")),
    PaperMatch({"table1": ("4",)}, variants=("add_experts", "add_4_experts", "experts_plus4")),
    PaperMatch({"table1": ("5",), "table2": ("13", "14"), "table3": ("2",), "table4": ("2",)},
               dims=_g(gate_position="G1")),
    PaperMatch({"table1": ("6",), "table3": ("3",), "table4": ("5",)},
               dims=_g(gate_position="G2")),
    PaperMatch({"table1": ("7",)}, dims=_g(gate_position="G3")),
    PaperMatch({"table1": ("8",)}, dims=_g(gate_position="G4")),
    PaperMatch({"table1": ("9",)}, dims=_g(gate_position="G5")),
    PaperMatch({"table1": ("10",), "table4": ("3",)},
               dims=_g(gate_position="G1", gate_granularity="headwise")),
    PaperMatch({"table1": ("11",)}, dims=_g(gate_position="G2", gate_granularity="headwise")),
    PaperMatch({"table1": ("12",), "table4": ("4",)},
               dims=_g(gate_position="G1", gate_sharing="head_shared")),
    PaperMatch({"table1": ("13",)}, dims=_g(gate_position="G2", gate_sharing="head_shared")),
    PaperMatch({"table1": ("14",), "table3": ("4",)},
               dims=_g(gate_position="G1", gate_combine="additive", gate_activation="silu")),
    PaperMatch({"table1": ("15",)}, dims=_g(gate_position="G1", gate_activation="silu")),
    PaperMatch({"table3": ("5",)}, dims=_g(nonlinearity="rmsnorm")),
    PaperMatch({"table3": ("6",)}, dims=_g(nonlinearity="silu")),
    PaperMatch({"table3": ("7",)},
               dims=_g(gate_position="G1", gate_combine="additive", gate_activation="identity")),
    PaperMatch({"table4": ("6",)}, dims=_g(gate_position="G1", gate_input_dependent=False)),
    PaperMatch({"table4": ("7",)}, dims=_g(gate_position="G1", gate_activation="ns_sigmoid")),
)


@lru_cache(maxsize=None)
def load_table(table: str) -> tuple[dict[str, str], ...]:
    """The rows of one shipped paper table, as strings exactly as printed."""
    if table not in TABLE_FILES:
        raise ValueError(f"paper table {table!r} is unknown; expected one of {sorted(TABLE_FILES)}")
    with open(PAPER_DIR / TABLE_FILES[table], newline="", encoding="utf-8") as fh:
        return tuple(csv.DictReader(fh))


def _row_key(row: Mapping[str, str]) -> str:
    return row.get("#") or row.get("Method", "")


def match(variant: str, dims: Mapping[str, Any]) -> PaperMatch | None:
    """The mapping entry for a variant: by name first, then by its full gate signature."""
    ours = normalize_dims(dims)
    return _match(variant, tuple(ours.items()))


@lru_cache(maxsize=4096)  # a big sweep asks for the same few (variant, dims) many times
def _match(variant: str, ours_items: tuple[tuple[str, Any], ...]) -> PaperMatch | None:
    for entry in PAPER_ROWS:
        if variant in entry.variants:
            return entry
    ours = dict(ours_items)
    if not ours["gate_position"] and ours["nonlinearity"] == "none":
        return None  # ungated and not named: a shape change we cannot identify by dims
    for entry in PAPER_ROWS:
        if entry.dims and normalize_dims(entry.dims) == ours:
            return entry
    return None


def paper_rows(variant: str, dims: Mapping[str, Any], table: str) -> list[dict[str, str]]:
    """The paper rows of ``table`` that reproduce this variant ([] when none)."""
    entry = match(variant, dims)
    if entry is None or table not in entry.rows:
        return []
    wanted = entry.rows[table]
    return [r for r in load_table(table) if _row_key(r) in wanted]


def paper_value(variant: str, dims: Mapping[str, Any], table: str, column: str) -> float | None:
    """One figure of the first matching row, as a float; None when absent or printed '–'."""
    for row in paper_rows(variant, dims, table):
        return to_float(row.get(column))
    return None


def paper_max_stable_lr(variant: str, dims: Mapping[str, Any]) -> float | None:
    """Table 2: the largest 'Max LR' among this variant's rows that did not diverge ('–')."""
    lrs = [to_float(r["Max LR"]) for r in paper_rows(variant, dims, "table2")
           if to_float(r.get("Avg PPL")) is not None]
    lrs = [lr for lr in lrs if lr is not None]
    return max(lrs) if lrs else None


def to_float(text: str | None) -> float | None:
    """'5.761' -> 5.761; '82.90 (−6.0)' -> 82.9; '–' / '' / None -> None."""
    if text is None:
        return None
    head = text.strip().split(" ")[0]
    if head in ("", MISSING, "-"):
        return None
    try:
        return float(head)
    except ValueError:
        return None
