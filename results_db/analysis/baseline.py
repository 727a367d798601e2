"""THE baseline rule of a sweep: one function, used by every surface (DB API, CLI, dashboard,
benchmarks/reproduction_table.py).

``pick_baseline(runs)`` returns the variant that deltas are measured against:

1. the variant named ``baseline``, when there is one;
2. else the **plain model**: among the variants that add nothing to the block --
   no gate (``n_gates`` 0 / no ``gate_position``), no non-linearity control
   (``nonlinearity`` none), no SwitchHead, no Native Sparse Attention (``nsa`` set: its
   branches replace dense attention), no sandwich norm, no residual clipping -- and keep
   the sweep's common architecture (``n_head``, ``n_kv_head``, ``moe_experts`` equal to the
   value most variants use: a "more kv heads" or "more experts" variant is an alternative,
   not the reference), the one with the fewest parameters; ties: the one declared first
   (smallest run id), then the name;
3. else None: no deltas (a sweep of gated variants only has no reference to compare with).

Comparisons then happen at the same learning rate (and the same value of every other axis the
baseline was swept over): see results_db/analysis/compare.py.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import polars as pl

from results_db.schema.vocab import DEFAULT_NORM_STYLE, GATE_DEFAULTS

NAMED = "baseline"
# Architecture a "plain" baseline shares with most variants of the sweep.
COMMON_ARCH = ("n_head", "n_kv_head", "moe_experts")


def _first_per_variant(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per variant (its first run: smallest id, else first row), in declared order."""
    order = next((c for c in ("id", "run_id") if c in runs.columns), None)
    df = runs.with_row_index("_row")
    key = pl.col(order) if order is not None else pl.col("_row")
    return (df.sort(key, "_row").group_by("variant", maintain_order=True).first()
            .drop("_row"))


def _col(df: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in df.columns else pl.lit(None)


def _adds_nothing(df: pl.DataFrame) -> pl.Expr:
    """No gate, no non-linearity control, no SwitchHead, no NSA, no sandwich norm, no clipping."""
    if "n_gates" in df.columns:
        ungated = pl.col("n_gates").fill_null(0) == 0
    else:
        ungated = _col(df, "gate_position").cast(pl.String).fill_null("") == ""
    none = str(GATE_DEFAULTS["nonlinearity"])
    return (ungated
            & (_col(df, "nonlinearity").cast(pl.String).fill_null(none) == none)
            & _col(df, "switch_head").is_null()
            & _col(df, "nsa").is_null()
            & (_col(df, "norm_style").cast(pl.String).fill_null(DEFAULT_NORM_STYLE)
               == DEFAULT_NORM_STYLE)
            & _col(df, "clip_residual").is_null())


def _common(values: list[Any]) -> Any:
    """The most frequent value; ties go to the smallest non-null one."""
    counts = Counter(values)
    best = max(counts.values())
    tied = sorted(v for v, c in counts.items() if c == best and v is not None)
    return tied[0] if tied else None


def pick_baseline(runs: pl.DataFrame) -> str | None:
    """The sweep's baseline variant (module docstring). ``runs``: one row per run or group
    with ``variant`` and whichever of n_gates/gate_position, nonlinearity, switch_head, nsa,
    norm_style, clip_residual, n_head, n_kv_head, moe_experts, params_total, id it has."""
    if runs.is_empty() or "variant" not in runs.columns:
        return None
    variants = _first_per_variant(runs)
    names = variants["variant"].to_list()
    if NAMED in names:
        return NAMED
    arch = pl.lit(True)
    for col in COMMON_ARCH:
        if col in variants.columns:
            common = _common(variants[col].to_list())
            arch = arch & (pl.col(col).is_null() if common is None else pl.col(col) == common)
    plain = variants.with_row_index("_declared").filter(_adds_nothing(variants) & arch)
    if plain.is_empty():
        return None
    params = _col(plain, "params_total").cast(pl.Int64).fill_null(0)
    return str(plain.sort(params, "_declared", "variant")["variant"][0])
