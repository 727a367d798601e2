"""The paper's ablation layouts for any sweep: quality (Tables 1/3), probes (Table 4), stability
(Table 2), long context (Table 5 style, dashboard/longctx.py), laid out from
``db.ablation_table`` (results_db computes every mean, Δ, CI and verdict; this module formats).

Each table is a numeric frame (for CSV) and a display frame of strings (page, Markdown, LaTeX),
one row per (variant, learning rate) group, baseline first, then the sweep's declared order.
With the paper's figures on, the quality table gains the paper's PPL and Δ% and whether our
Δ points the same way ("agree" / "disagree"; "(noise)" when our verdict is not beyond noise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from contract.metrics import (
    BENCH,
    FIRST_TOKEN_ATTENTION,
    GATE_SCORE_MEAN,
    LOSS_SPIKES,
    MAX_ACTIVATION,
    MAX_GRAD_NORM,
    VAL_PPL,
    is_bench_main,
)
from dashboard import longctx, paper
from dashboard.tables import (
    fmt_delta_ci,
    fmt_lr,
    fmt_mean_std,
    fmt_num,
    fmt_pct,
    fmt_printed,
    label_columns,
    params_label,
    row_labels,
)

Kind = Literal["quality", "probes", "stability", "longctx"]
KINDS: dict[str, str] = {
    "quality": "PPL and benchmarks (Tables 1 / 3)",
    "probes": "Gate score, massive activation, first-token attention (Table 4)",
    "stability": "Divergence and max stable LR (Table 2)",
    "longctx": "Long context: PPL and retrieval by RoPE extension and length (Table 5 style)",
}
PROBE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    # (our label, metric, Table 4 column)
    ("Gate score", GATE_SCORE_MEAN, "Gate score"), ("M-Act", MAX_ACTIVATION, "M-Act"),
    ("F-Attn", FIRST_TOKEN_ATTENTION, "F-Attn"), ("PPL", VAL_PPL, "PPL"),
)
STABILITY_METRICS: tuple[str, ...] = (LOSS_SPIKES, MAX_GRAD_NORM, VAL_PPL)
SPIKES_AT_BEST = "Loss spikes at best LR"
GRAD_AT_BEST = "Max grad norm at best LR"
SCALE_CAVEAT = ("The paper's figures come from a 15A2B MoE / 1.7B dense model trained on "
                "400B-3.5T tokens: compare the DIRECTION of each effect (the 'Agree' column), "
                "not the values.")


@dataclass(frozen=True)
class AblationTable:
    kind: str
    numeric: pl.DataFrame  # one row per group, floats (CSV export)
    display: pl.DataFrame  # the same rows as strings (page, Markdown, LaTeX)
    baseline: str | None


def metric_names(kind: str, available: list[str]) -> list[str]:
    """The summary names a table of ``kind`` reads (``available``: the sweep's names)."""
    if kind == "quality":
        return [VAL_PPL, *[n for n in available if is_bench_main(n)]]
    if kind == "longctx":
        return [c.metric for c in longctx.columns(available)] or [VAL_PPL]
    if kind == "probes":
        return [m for _, m, _ in PROBE_COLUMNS]
    return list(STABILITY_METRICS)


# The paper's tables by model: Tables 1, 3, 4 and 6 are the same 15A2B MoE (one baseline,
# PPL 6.026), Table 2 the 1.7B dense models. One quality table never mixes the two.
MOE_TABLES: tuple[str, ...] = ("table1", "table3", "table4", "table6")
DENSE_TABLES: tuple[str, ...] = ("table2",)
_PPL_COLUMN = {"table1": "Avg PPL", "table2": "Avg PPL", "table3": "Avg PPL", "table4": "PPL",
               "table6": "PPL"}


def paper_tables(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """The MoE tables when any variant has a row there, else Table 2 (the dense study)."""
    moe = any(paper.paper_rows(r["variant"], r, t) for r in rows for t in MOE_TABLES)
    return MOE_TABLES if moe else DENSE_TABLES


def paper_ppl(row: dict[str, Any], tables: tuple[str, ...]) -> float | None:
    for table in tables:
        if paper.paper_rows(row["variant"], row, table):
            return paper.paper_value(row["variant"], row, table, _PPL_COLUMN[table])
    return None


def agreement(ours_pct: float | None, paper_pct: float | None, verdict: str | None) -> str:
    """Whether our Δ points the paper's way: 'agree' / 'disagree', '(noise)' appended when
    our verdict is not beyond noise; '–' when either side has no Δ."""
    if ours_pct is None or paper_pct is None or verdict in (None, "baseline"):
        return "–"
    same = (ours_pct < 0) == (paper_pct < 0) or (ours_pct == 0 == paper_pct)
    word = "agree" if same else "disagree"
    return word if verdict in ("better", "worse") else f"{word} (noise)"


def _quality_rows(rows: list[dict[str, Any]], benches: list[str], with_paper: bool,
                  base_total: int | None) -> list[dict[str, str]]:
    tables = paper_tables(rows) if with_paper else ()
    base = next((r for r in rows if r["is_baseline"]), None)
    base_ppl = paper_ppl(base, tables) if (base and with_paper) else None
    out = []
    for r in rows:
        m = VAL_PPL
        d = {"Variant": r["row"], **label_columns(r), "Added": params_label(r, base_total),
             "PPL": fmt_mean_std(r[f"{m}:mean"], r[f"{m}:std"]),
             "ΔPPL [95% CI]": "–" if r["is_baseline"] else fmt_delta_ci(
                 r[f"{m}:delta_pct"], r[f"{m}:ci_low_pct"], r[f"{m}:ci_high_pct"]),
             "Verdict": r[f"{m}:verdict"] or "–"}
        for b in benches:
            d[b.removeprefix(BENCH)] = fmt_mean_std(r[f"{b}:mean"], r[f"{b}:std"])
        d["n"] = str(r[f"{m}:n"] or 0)
        if with_paper:
            pp = paper_ppl(r, tables)
            ppct = None if pp is None or not base_ppl else (pp - base_ppl) / base_ppl * 100
            d["Paper PPL (Δ%)"] = fmt_num(pp) if r["is_baseline"] or ppct is None else \
                f"{fmt_num(pp)} ({fmt_pct(ppct)})"
            d["Agree"] = agreement(r[f"{m}:delta_pct"], ppct, r[f"{m}:verdict"])
            added = None
            for t in ("table1", "table6"):
                if t in tables and added is None:
                    added = paper.paper_value(r["variant"], r, t, "Added (M)")
            d["Paper +M"] = fmt_printed(added)  # "Added (M)" as printed
        out.append(d)
    return out


def _probe_rows(rows: list[dict[str, Any]], with_paper: bool) -> list[dict[str, str]]:
    out = []
    for r in rows:
        d = {"Variant": r["row"], **label_columns(r)}
        for label, metric, _ in PROBE_COLUMNS:
            d[label] = fmt_mean_std(r[f"{metric}:mean"], r[f"{metric}:std"])
        d["n"] = str(r["n"])
        if with_paper:
            for label, _, col in PROBE_COLUMNS:
                d[f"Paper {label}"] = fmt_printed(paper.paper_value(r["variant"], r, "table4",
                                                                     col))
        out.append(d)
    return out


def _longctx_rows(rows: list[dict[str, Any]], cols: list[longctx.LongCtxColumn]
                  ) -> list[dict[str, str]]:
    out = []
    for r in rows:
        d = {"Variant": r["row"], **label_columns(r)}
        for c in cols:
            d[c.label] = fmt_mean_std(r[f"{c.metric}:mean"], r[f"{c.metric}:std"])
        d["n"] = str(r["n"])
        out.append(d)
    return out


def _stability_rows(rows: list[dict[str, Any]], msl: pl.DataFrame | None,
                    with_paper: bool) -> list[dict[str, str]]:
    """One row per variant across its learning rates (max stable LR: db.max_stable_lr)."""
    by_var: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_var.setdefault(r["variant"], []).append(r)
    summ = {} if msl is None or msl.is_empty() else \
        {s["variant"]: s for s in msl.iter_rows(named=True)}
    out = []
    for variant, group in by_var.items():
        s = summ.get(variant, {})
        best = next((g for g in group if g["lr"] == s.get("best_lr")), group[0])
        div = sum(g["n_diverged"] or 0 for g in group)
        total = div + sum(g["n"] or 0 for g in group)
        d = {"Variant": variant, **label_columns(group[0]), "Diverged": f"{div}/{total}",
             # one row per variant, these two at its best LR: the header says so (the
             # counts were unlabelled and read as totals over the ladder)
             SPIKES_AT_BEST: fmt_mean_std(best[f"{LOSS_SPIKES}:mean"],
                                          best[f"{LOSS_SPIKES}:std"]),
             GRAD_AT_BEST: fmt_mean_std(best[f"{MAX_GRAD_NORM}:mean"],
                                        best[f"{MAX_GRAD_NORM}:std"]),
             "LRs": ", ".join(fmt_lr(g["lr"]) for g in sorted(group, key=lambda g: g["lr"] or 0)),
             "Best LR": fmt_lr(s.get("best_lr")), "Max stable LR": fmt_lr(s.get("max_stable_lr"))}
        if with_paper:
            d["Paper max LR"] = fmt_lr(paper.paper_max_stable_lr(variant, group[0]))
        out.append(d)
    return out


def build(kind: Kind, frame: pl.DataFrame, metrics: list[str], *, with_paper: bool = False,
          max_stable_lr: pl.DataFrame | None = None) -> AblationTable:
    """One ablation table from ``db.ablation_table(sweep, metrics)`` (``frame``)."""
    if kind not in KINDS:
        raise ValueError(f"ablation kind {kind!r} is unknown; expected one of {sorted(KINDS)}")
    if frame.is_empty():
        empty = pl.DataFrame(schema={"Variant": pl.String})
        return AblationTable(kind, frame, empty, None)
    frame = frame.with_columns(row_labels(frame))
    rows = list(frame.iter_rows(named=True))
    base = next((r["variant"] for r in rows if r["is_baseline"]), None)
    if kind == "quality":
        base_total = next((r["params_total"] for r in rows if r["is_baseline"]), None)
        shown = _quality_rows(rows, [m for m in metrics if is_bench_main(m)], with_paper,
                              base_total)
    elif kind == "probes":
        shown = _probe_rows(rows, with_paper)
    elif kind == "longctx":
        shown = _longctx_rows(rows, longctx.columns(metrics))
    else:
        shown = _stability_rows(rows, max_stable_lr, with_paper)
    display = pl.DataFrame(shown) if shown else pl.DataFrame(schema={"Variant": pl.String})
    return AblationTable(kind=kind, numeric=_numeric(frame), display=display, baseline=base)


def _numeric(frame: pl.DataFrame) -> pl.DataFrame:
    """The table's numbers for CSV: label columns first, list columns dropped."""
    labels = pl.DataFrame([label_columns(r) for r in frame.iter_rows(named=True)])
    keep = [c for c, t in frame.schema.items() if not isinstance(t, pl.List) and c != "row"]
    return pl.concat([frame.select("row"), labels, frame.select(keep)], how="horizontal")
