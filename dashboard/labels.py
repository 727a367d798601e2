"""Paper-style labels for a variant, computed from the gate dimension columns of the runs table.

A variant is data (its gate dimensions), so its row label in an ablation table is derived, not
typed: "SDPA Elementwise G1", activation "sigmoid", score shape "n×q×dk" (Table 1's notation:
n tokens, q query heads, k kv heads, dk head dim).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contract.gate_positions import POSITIONS
from results_db.schema.vocab import DIMENSIONS, GATE_DEFAULTS, GATE_DIMENSIONS

# The runs table's gate dimension columns (results_db derives them from the RunSpec JSON).
DIM_COLUMNS: tuple[str, ...] = GATE_DIMENSIONS
# Columns the leaderboard may show and filter on, when the runs frame has them.
FILTER_COLUMNS: tuple[str, ...] = DIMENSIONS

_ACT = {"sigmoid": "sigmoid", "silu": "SiLU", "ns_sigmoid": "NS-sigmoid", "identity": "identity"}
_NONLIN = {"rmsnorm": "RMSNorm", "silu": "SiLU"}

# The paper's defaults (the RunSpec contract's); a missing/NULL dimension means the default.
DEFAULTS: dict[str, Any] = GATE_DEFAULTS


def normalize_dims(row: Mapping[str, Any]) -> dict[str, Any]:
    """The seven dims of a run/variant with defaults filled; ungated runs keep position None."""
    out: dict[str, Any] = {"gate_position": row.get("gate_position") or None}
    for col, default in DEFAULTS.items():
        val = row.get(col)
        out[col] = default if val is None or val == "" else val
    if isinstance(out["gate_input_dependent"], (int, str)):
        out["gate_input_dependent"] = str(out["gate_input_dependent"]).lower() in ("1", "true")
    return out


def method_label(dims: Mapping[str, Any], variant: str) -> str:
    """'SDPA Elementwise G1', 'v Head-Shared G2', 'SDPA RMSNorm', 'Switch v',
    'Baseline + Sandwich Norm', 'NSA gated', 'NSA equal + SDPA Elementwise G1', or the
    variant name."""
    label = _gate_label(dims, variant)
    nsa = dims.get("nsa")  # Native Sparse Attention's branch combination; None: dense
    if nsa:
        gated = normalize_dims(dims)["gate_position"]
        label = f"NSA {nsa} + {label}" if gated else f"NSA {nsa}"
    return label + _block_suffix(dims)


def _block_suffix(dims: Mapping[str, Any]) -> str:
    """The baselines' block changes (Table 2's sandwich norm, the appendix's clipping)."""
    out = " + Sandwich Norm" if dims.get("norm_style") == "sandwich" else ""
    clip = dims.get("clip_residual")
    return out + (f" + Clip ±{float(clip):g}" if clip is not None else "")


def _gate_label(dims: Mapping[str, Any], variant: str) -> str:
    d = normalize_dims(dims)
    pos = d["gate_position"]
    if not pos:
        nl = _NONLIN.get(str(d["nonlinearity"]))
        if nl:
            return f"SDPA {nl}"
        if dims.get("switch_head"):  # Table 6; E and k are not dims: the variant name says them
            return f"Switch {dims['switch_head']}"
        plain = variant == "baseline" or bool(_block_suffix(dims))
        return "Baseline" if plain else variant
    if "+" in str(pos):  # several gates: the label cannot say it all; the variant name does
        return f"{variant} ({pos})"
    if d["gate_sharing"] == "head_shared":
        kind = "Head-Shared"
    elif d["gate_combine"] == "additive":
        kind = "Additive"
    else:
        kind = str(d["gate_granularity"]).capitalize()
    if not d["gate_input_dependent"]:
        kind = f"Input-Independent {kind}"
    site = POSITIONS[pos].site if pos in POSITIONS else pos
    return f"{site} {kind} {pos}"


def activation_label(dims: Mapping[str, Any]) -> str:
    d = normalize_dims(dims)
    if d["gate_position"]:
        return _ACT.get(str(d["gate_activation"]), str(d["gate_activation"]))
    return _NONLIN.get(str(d["nonlinearity"]), "–")


def score_shape(dims: Mapping[str, Any]) -> str:
    """Table 1's 'Score shape' column: the shape of one token's gate scores, per layer."""
    d = normalize_dims(dims)
    pos = d["gate_position"]
    if not pos or "+" in str(pos):
        return "–"
    where = POSITIONS.get(pos)
    if where is not None and not where.has_heads:
        return "n×d_model"
    heads = (where.heads_label if where is not None else None) or "q"  # unknown: query heads
    if d["gate_sharing"] == "head_shared":
        return "n×dk"
    if d["gate_granularity"] == "headwise":
        return f"n×{heads}"
    return f"n×{heads}×dk"


def human_count(n: float | None) -> str:
    """8192 -> '8.2K', 201_326_592 -> '201.3M'; None -> '–'."""
    if n is None:
        return "–"
    n = float(n)
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return f"{n:.0f}"
