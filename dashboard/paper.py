"""The paper's reference figures and which of our variants each row corresponds to.

The CSVs in ``paper_data/`` are copied from the paper (see paper_data/README.md). ``PAPER_ROWS``
is the mapping, as data: an entry matches a variant by its NAME (for variants that are not a
gate, e.g. "kv_heads_x2") or by its gate DIMENSIONS (missing dims = the paper's defaults), and
names the rows ("#" column, or "Method" for Table 6) of each paper table it reproduces.
Extend it by adding entries, not code. Two groups: the CPU-scale sweeps' variants (generic
names and gate dims: the paper's figure is indicative) and the paper-scale sweeps' variants
(exact names ``t<table>r<row>_...``, one paper model each). tests/dashboard/test_paper_mapping.py
checks
that every row of Tables 1-4 and 6 is reproduced by a variant of a shipped sweep, and that each
claim agrees with the variant's config.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from contract.gate_positions import DENSE_OUTPUT, KEY, QUERY, SDPA_OUTPUT, VALUE
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


# CPU-scale sweeps (sweeps/*.yaml): the paper figure beside ours is indicative (other scale).
# The generic Table 2 rows are the paper's headline pair (48L, 1T tokens: the baseline
# diverges at 8e-3, the gated model does not); sandwich norm and the headwise gate only
# appear in the 48L / 400B block (rows 7, 9).
_CPU_ROWS: tuple[PaperMatch, ...] = (
    PaperMatch({"table1": ("1",), "table2": ("11", "12"), "table3": ("1",), "table4": ("1",),
                "table6": ("Baseline (q32, kv4)",)}, variants=("baseline",)),
    PaperMatch({"table1": ("2",)}, variants=("kv_heads_x2", "k8", "kv_heads_8")),
    PaperMatch({"table1": ("3",)}, variants=("q_heads_x1.5", "q48", "q_heads_48")),
    PaperMatch({"table1": ("4",)}, variants=("add_experts", "add_4_experts", "experts_plus4")),
    PaperMatch({"table2": ("7",)}, variants=("baseline_sandwich", "sandwich", "sandwich_norm")),
    PaperMatch({"table6": ("Switch kv, 8top8",)}, variants=("switch_kv_8top8",)),
    PaperMatch({"table6": ("Switch kv, 4top4",)}, variants=("switch_kv_4top4",)),
    PaperMatch({"table6": ("Switch v, 4top4",)}, variants=("switch_v_4top4",)),
    PaperMatch({"table6": ("Switch v, 8top2",)}, variants=("switch_v_8top2",)),
    PaperMatch({"table6": ("Switch v, 1top1",)}, variants=("switch_v_1top1",)),
    PaperMatch({"table1": ("5",), "table2": ("13", "14"), "table3": ("2",), "table4": ("2",)},
               dims=_g(gate_position=SDPA_OUTPUT)),
    PaperMatch({"table1": ("6",), "table3": ("3",), "table4": ("5",)},
               dims=_g(gate_position=VALUE)),
    PaperMatch({"table1": ("7",)}, dims=_g(gate_position=KEY)),
    PaperMatch({"table1": ("8",)}, dims=_g(gate_position=QUERY)),
    PaperMatch({"table1": ("9",)}, dims=_g(gate_position=DENSE_OUTPUT)),
    PaperMatch({"table1": ("10",), "table2": ("9",), "table4": ("3",)},
               dims=_g(gate_position=SDPA_OUTPUT, gate_granularity="headwise")),
    PaperMatch({"table1": ("11",)}, dims=_g(gate_position=VALUE, gate_granularity="headwise")),
    PaperMatch({"table1": ("12",), "table4": ("4",)},
               dims=_g(gate_position=SDPA_OUTPUT, gate_sharing="head_shared")),
    PaperMatch({"table1": ("13",)}, dims=_g(gate_position=VALUE, gate_sharing="head_shared")),
    PaperMatch({"table1": ("14",), "table3": ("4",)},
               dims=_g(gate_position=SDPA_OUTPUT, gate_combine="additive", gate_activation="silu")),
    PaperMatch({"table1": ("15",)}, dims=_g(gate_position=SDPA_OUTPUT, gate_activation="silu")),
    PaperMatch({"table3": ("5",)}, dims=_g(nonlinearity="rmsnorm")),
    PaperMatch({"table3": ("6",)}, dims=_g(nonlinearity="silu")),
    PaperMatch({"table3": ("7",)},
               dims=_g(gate_position=SDPA_OUTPUT, gate_combine="additive",
                       gate_activation="identity")),
    PaperMatch({"table4": ("6",)}, dims=_g(gate_position=SDPA_OUTPUT, gate_input_dependent=False)),
    PaperMatch({"table4": ("7",)},
               dims=_g(gate_position=SDPA_OUTPUT, gate_activation="ns_sigmoid")),
)


def _t(table: str, *rows: str) -> dict[str, tuple[str, ...]]:
    return {table: rows}


# Paper-scale sweeps (sweeps/paper/*.yaml): exact, by name, one paper model per variant. Named
# so that e.g. the MoE G1 run never claims Table 2's dense rows, as a dims match would.
_T1_SHARED = {"table3": ("1",), "table4": ("1",), "table6": ("Baseline (q32, kv4)",)}
_PAPER_SCALE_ROWS: tuple[PaperMatch, ...] = (
    # sweeps/paper/moe_15a2b.yaml: Tables 1, 3, 4 (rows shared between tables on one variant)
    PaperMatch({"table1": ("1",), **_T1_SHARED}, variants=("t1r01_baseline", "t6r01_baseline")),
    PaperMatch(_t("table1", "2"), variants=("t1r02_kv8",)),
    PaperMatch(_t("table1", "3"), variants=("t1r03_q48",)),
    PaperMatch(_t("table1", "4"), variants=("t1r04_add4_experts",)),
    PaperMatch({"table1": ("5",), "table3": ("2",), "table4": ("2",)},
               variants=("t1r05_sdpa_elementwise",)),
    PaperMatch({"table1": ("6",), "table3": ("3",), "table4": ("5",)},
               variants=("t1r06_v_elementwise",)),
    PaperMatch(_t("table1", "7"), variants=("t1r07_k_elementwise",)),
    PaperMatch(_t("table1", "8"), variants=("t1r08_q_elementwise",)),
    PaperMatch(_t("table1", "9"), variants=("t1r09_dense_output",)),
    PaperMatch({"table1": ("10",), "table4": ("3",)}, variants=("t1r10_sdpa_headwise",)),
    PaperMatch(_t("table1", "11"), variants=("t1r11_v_headwise",)),
    PaperMatch({"table1": ("12",), "table4": ("4",)}, variants=("t1r12_sdpa_head_shared",)),
    PaperMatch(_t("table1", "13"), variants=("t1r13_v_head_shared",)),
    PaperMatch({"table1": ("14",), "table3": ("4",)}, variants=("t1r14_sdpa_additive_silu",)),
    PaperMatch(_t("table1", "15"), variants=("t1r15_sdpa_elementwise_silu",)),
    PaperMatch(_t("table3", "5"), variants=("t3r05_sdpa_groupnorm",)),
    PaperMatch(_t("table3", "6"), variants=("t3r06_sdpa_silu",)),
    PaperMatch(_t("table3", "7"), variants=("t3r07_sdpa_additive_identity",)),
    PaperMatch(_t("table4", "6"), variants=("t4r06_sdpa_input_independent",)),
    PaperMatch(_t("table4", "7"), variants=("t4r07_sdpa_ns_sigmoid",)),
    # sweeps/paper/dense_1p7b.yaml: Table 2, one row per variant
    *(PaperMatch(_t("table2", str(i)), variants=(name,)) for i, name in enumerate((
        "t2r01_28l_400b_baseline", "t2r02_28l_400b_sdpa", "t2r03_28l_3p5t_baseline",
        "t2r04_28l_3p5t_sdpa", "t2r05_48l_400b_baseline", "t2r06_48l_400b_baseline_lr8e3",
        "t2r07_48l_400b_sandwich_lr8e3", "t2r08_48l_400b_sdpa", "t2r09_48l_400b_sdpa_headwise",
        "t2r10_48l_400b_sdpa_lr8e3", "t2r11_48l_1t_baseline", "t2r12_48l_1t_baseline_lr8e3",
        "t2r13_48l_1t_sdpa", "t2r14_48l_1t_sdpa_lr8e3"), start=1)),
    # sweeps/paper/switch_heads.yaml: Table 6 (its baseline is t6r01_baseline above)
    PaperMatch(_t("table6", "Switch kv, 8top8"), variants=("t6r02_switch_kv_8top8",)),
    PaperMatch(_t("table6", "Switch kv, 4top4"), variants=("t6r03_switch_kv_4top4",)),
    PaperMatch(_t("table6", "Switch v, 4top4"), variants=("t6r04_switch_v_4top4",)),
    PaperMatch(_t("table6", "Switch v, 8top2"), variants=("t6r05_switch_v_8top2",)),
    PaperMatch(_t("table6", "Switch v, 1top1"), variants=("t6r06_switch_v_1top1",)),
)
PAPER_ROWS: tuple[PaperMatch, ...] = _CPU_ROWS + _PAPER_SCALE_ROWS


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
    if dims.get("nsa"):  # Native Sparse Attention: no model of the paper's tables
        return None
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
    lrs = [lr for r in paper_rows(variant, dims, "table2")
           if to_float(r.get("Avg PPL")) is not None and (lr := to_float(r["Max LR"])) is not None]
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
