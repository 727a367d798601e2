"""The paper's ablation layouts for any sweep: quality (Tables 1/3), probes (Table 4), stability
(Table 2), long context (Table 5 style, dashboard/longctx.py). Each table is a numeric frame
(for CSV) and a display frame of strings (for the page, Markdown and LaTeX), one row per
variant, baseline first, then the sweep's declared order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from dashboard import longctx, paper
from dashboard.tables import (FINISHED_STATES, FIRST_ATTN, GATE_SCORE, MAX_ACT, RESULT_STATES,
                              VAL_PPL, add_delta, baseline_params_total, baseline_row,
                              fmt_delta, fmt_mean_std,
                              fmt_num, label_columns, params_label, variant_order, variant_stats)

Kind = Literal["quality", "probes", "stability", "longctx"]
KINDS: dict[str, str] = {
    "quality": "PPL and benchmarks (Tables 1 / 3)",
    "probes": "Gate score, massive activation, first-token attention (Table 4)",
    "stability": "Divergence and max stable LR (Table 2)",
    "longctx": "Long context: PPL and retrieval by RoPE extension and length (Table 5 style)",
}
PROBE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (our label, metric, Table 4 column)
    ("Gate score", GATE_SCORE, "Gate score"), ("M-Act", MAX_ACT, "M-Act"),
    ("F-Attn", FIRST_ATTN, "F-Attn"), ("PPL", VAL_PPL, "PPL"),
)


@dataclass(frozen=True)
class AblationTable:
    kind: str
    numeric: pl.DataFrame  # one row per variant, floats (CSV export)
    display: pl.DataFrame  # the same rows as strings (page, Markdown, LaTeX)
    baseline: str | None


def is_bench_main(name: str) -> bool:
    """``bench/<task>`` (the task's main metric), not ``bench/<task>/<metric>[/<filter>]``."""
    return name.startswith("bench/") and name.count("/") == 1


def bench_names(summaries: pl.DataFrame) -> list[str]:
    """The sweep's benchmark main metrics (``bench/<task>``), sorted."""
    if summaries.is_empty():
        return []
    return sorted(n for n in summaries["name"].unique().to_list() if is_bench_main(n))


def metric_names(kind: str, available: list[str]) -> list[str]:
    """The summary names a table of ``kind`` reads (``available``: the sweep's names)."""
    if kind == "quality":
        return [VAL_PPL, *[n for n in available if is_bench_main(n)]]
    if kind == "longctx":
        return [c.metric for c in longctx.columns(available)]
    if kind == "probes":
        return [m for _, m, _ in PROBE_COLUMNS]
    return ["stability/loss_spikes", "stability/max_grad_norm", VAL_PPL]


def _ordered(stats: pl.DataFrame, runs: pl.DataFrame, by: str = "row") -> list[dict[str, Any]]:
    by_key = {r[by]: r for r in stats.iter_rows(named=True)}
    return [by_key[v] for v in variant_order(runs, by) if v in by_key]


# The paper's tables by model: Tables 1, 3, 4 and 6 are the same 15A2B MoE (one baseline,
# PPL 6.026), Table 2 the 1.7B dense models. One quality table never mixes the two.
MOE_TABLES: tuple[str, ...] = ("table1", "table3", "table4", "table6")
DENSE_TABLES: tuple[str, ...] = ("table2",)
_PPL_COLUMN = {"table1": "Avg PPL", "table2": "Avg PPL", "table3": "Avg PPL", "table4": "PPL",
               "table6": "PPL"}


def paper_tables(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """The tables a sweep's quality table quotes: the MoE tables when any variant has a row
    there (then e.g. a sandwich-norm variant, in Table 2 only, shows no paper PPL), else Table 2
    (the dense study, sweeps/paper/dense_1p7b.yaml)."""
    moe = any(paper.paper_rows(r["variant"], r, t) for r in rows for t in MOE_TABLES)
    return MOE_TABLES if moe else DENSE_TABLES


def _paper_table(variant: str, row: dict[str, Any], tables: tuple[str, ...]) -> str | None:
    for table in tables:
        if paper.paper_rows(variant, row, table):
            return table
    return None


def _quality_row(r: dict[str, Any], benches: list[str], tables: tuple[str, ...] | None,
                 baseline_total: int | None) -> dict[str, str]:
    """One variant row; ``tables``: the paper tables to quote (None: no paper columns)."""
    out = {"Variant": str(r["row"]), **label_columns(r),
           "Added": params_label(r, baseline_total),
           "PPL": fmt_mean_std(r[f"{VAL_PPL}:mean"], r[f"{VAL_PPL}:std"]),
           "ΔPPL": fmt_delta(r["delta"], r["delta_pct"])}
    for b in benches:
        out[b.removeprefix("bench/")] = fmt_mean_std(r[f"{b}:mean"], r[f"{b}:std"])
    out["n"] = str(r[f"{VAL_PPL}:n"])
    if tables is not None:
        table = _paper_table(r["variant"], r, tables)
        ppl = paper.paper_value(r["variant"], r, table, _PPL_COLUMN[table]) if table else None
        # "Added (M)": Table 1's, else Table 6's (Switch-Head); Table 2 prints none
        added = None
        for t in ("table1", "table6"):
            if t in tables and added is None:
                added = paper.paper_value(r["variant"], r, t, "Added (M)")
        out["Paper PPL"] = fmt_num(ppl)
        out["Paper Added (M)"] = "–" if added is None else f"{added:g}"  # as printed: 201, 1.6
    return out


def _probes_row(r: dict[str, Any], with_paper: bool) -> dict[str, str]:
    out = {"Variant": str(r["row"]), **label_columns(r)}
    for label, metric, _ in PROBE_COLUMNS:
        out[label] = fmt_mean_std(r[f"{metric}:mean"], r[f"{metric}:std"])
    out["n"] = str(r["runs"])
    if with_paper:
        for label, _, col in PROBE_COLUMNS:
            out[f"Paper {label}"] = fmt_num(paper.paper_value(r["variant"], r, "table4", col))
    return out


def _stability_row(r: dict[str, Any], msl: dict[str, float], with_paper: bool) -> dict[str, str]:
    out = {"Variant": str(r["variant"]), **label_columns(r),
           "Diverged": f"{r['diverged_runs']}/{r['runs']}",
           "Loss spikes": fmt_mean_std(r["stability/loss_spikes:mean"],
                                       r["stability/loss_spikes:std"]),
           "Max grad norm": fmt_mean_std(r["stability/max_grad_norm:mean"],
                                         r["stability/max_grad_norm:std"]),
           "LRs": ", ".join(fmt_num(x) for x in r["lrs"]) if r["lrs"] else "–",
           "Max stable LR": fmt_num(msl.get(r["variant"]))}
    if with_paper:
        out["Paper max LR"] = fmt_num(paper.paper_max_stable_lr(r["variant"], r))
    return out


def _longctx_row(r: dict[str, Any], cols: list[longctx.LongCtxColumn]) -> dict[str, str]:
    out = {"Variant": str(r["row"]), **label_columns(r)}
    for c in cols:
        out[c.label] = fmt_mean_std(r[f"{c.metric}:mean"], r[f"{c.metric}:std"])
    out["n"] = str(r["runs"])
    return out


def _stability_stats(runs: pl.DataFrame, summaries: pl.DataFrame) -> pl.DataFrame:
    metrics = ["stability/loss_spikes", "stability/max_grad_norm", VAL_PPL]
    stats = variant_stats(runs, summaries, metrics, FINISHED_STATES, by="variant")
    extra = (runs.filter(pl.col("status").is_in(list(FINISHED_STATES))).group_by("variant")
             .agg((pl.col("status") == "diverged").sum().alias("diverged_runs"),
                  (pl.col("lr").unique().sort() if "lr" in runs.columns
                   else pl.lit(None, pl.Float64).implode()).alias("lrs")))
    return stats.join(extra, on="variant", how="left")


def max_stable_lr_map(frame: pl.DataFrame | None) -> dict[str, float]:
    """``db.max_stable_lr(sweep)`` -> {variant: lr}; tolerant of a missing or empty frame."""
    if frame is None or frame.is_empty() or "variant" not in frame.columns:
        return {}
    col = "max_stable_lr" if "max_stable_lr" in frame.columns else frame.columns[-1]
    return {r["variant"]: r[col] for r in frame.iter_rows(named=True) if r[col] is not None}


def build(kind: Kind, runs: pl.DataFrame, summaries: pl.DataFrame, *, with_paper: bool = False,
          max_stable_lr: pl.DataFrame | None = None) -> AblationTable:
    """One ablation table of a sweep (``runs``/``summaries`` already restricted to it)."""
    if kind not in KINDS:
        raise ValueError(f"ablation kind {kind!r} is unknown; expected one of {sorted(KINDS)}")
    base = baseline_row(runs)
    if kind == "quality":
        benches = bench_names(summaries)
        stats = add_delta(variant_stats(runs, summaries, [VAL_PPL, *benches], RESULT_STATES),
                          VAL_PPL, base)
        ordered = _ordered(stats, runs)
        tables = paper_tables(ordered) if with_paper else None
        base_total = baseline_params_total(runs)
        rows = [_quality_row(r, benches, tables, base_total) for r in ordered]
    elif kind == "probes":
        stats = variant_stats(runs, summaries, [m for _, m, _ in PROBE_COLUMNS], RESULT_STATES)
        ordered = _ordered(stats, runs)
        rows = [_probes_row(r, with_paper) for r in ordered]
    elif kind == "longctx":
        cols = longctx.columns(summaries["name"].to_list() if summaries.height else [])
        stats = variant_stats(runs, summaries, [c.metric for c in cols], RESULT_STATES)
        ordered = _ordered(stats, runs)
        rows = [_longctx_row(r, cols) for r in ordered]
    else:  # stability: per variant across its LRs
        stats = _stability_stats(runs, summaries)
        msl = max_stable_lr_map(max_stable_lr)
        ordered = _ordered(stats, runs, "variant")
        rows = [_stability_row(r, msl, with_paper) for r in ordered]
    display = pl.DataFrame(rows) if rows else pl.DataFrame(schema={"Variant": pl.String})
    return AblationTable(kind=kind, numeric=_numeric(stats, ordered), display=display,
                         baseline=base)


def _numeric(stats: pl.DataFrame, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The stats rows in display order with the label columns, minus list columns (CSV-safe)."""
    if not rows:
        return stats
    labels = pl.DataFrame([label_columns(r) for r in rows])
    ordered = pl.DataFrame(rows, schema=stats.schema)
    keep = [c for c, t in ordered.schema.items()
            if not isinstance(t, pl.List) and c not in ("row", "variant")]
    return pl.concat([ordered.select("row", "variant"), labels, ordered.select(keep)],
                     how="horizontal")
