"""Run comparison as researchers do it in W&B / MLflow compare: parallel coordinates over the
swept dimensions, and each variant at its own best LR against the baseline at *its* best LR
(the statistic is db.best_vs_best, results_db/analysis/bestlr.py; here only its display).

Pure polars over frames the pages already read (db.leaderboard, the runs, their summaries).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import polars as pl

from dashboard.tables import fmt_delta_ci, fmt_lr, fmt_num, fmt_pct, fmt_verdict, row_labels


def dimension_columns(board: pl.DataFrame) -> list[str]:
    """db.leaderboard's dimension columns (between ``variant`` and ``n``) that vary."""
    lo = board.columns.index("variant") + 1
    dims = board.columns[lo:board.columns.index("n")]
    return [c for c in dims if board[c].cast(pl.String).fill_null("–").n_unique() > 1]


def fmt_axis_value(v: float, name: str) -> str:
    """One axis value as text: the LR as people write it, Δ% signed, whole numbers without
    decimals (n_head 2, 4 -- not "2.000/4.000"), others by fmt_num."""
    if is_log(name):
        return fmt_lr(v)
    if name == "delta_pct":
        return fmt_pct(v)
    return f"{v:.0f}" if float(v).is_integer() and abs(v) < 1e15 else fmt_num(v)


def is_log(name: str) -> bool:
    """Whether an axis of this config key is read on log10: learning rates."""
    return name == "lr" or name.endswith(".lr")


def axis_positions(col: pl.Series, name: str) -> tuple[list[float], list[str], list[bool]]:
    """Axis positions in [0, 1], labels, and which labels the axis writes: numbers min-max
    (a learning rate on log10) with only the extremes written (every row's value at its
    height overlapped into a smudge), anything else its sorted distinct values evenly spaced
    ('–' for no value), each written once."""
    if col.dtype.is_numeric():
        vals = [None if v is None or not math.isfinite(v) else float(v) for v in col.to_list()]
        log = is_log(name) and all(v > 0 for v in vals if v is not None)
        scaled = [None if v is None else (math.log10(v) if log else v) for v in vals]
        known = [v for v in scaled if v is not None]
        lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
        span = hi - lo or 1.0
        pos = [0.5 if v is None or hi == lo else (v - lo) / span for v in scaled]
        labels = ["–" if v is None else fmt_axis_value(v, name) for v in vals]
        ends = {lo, hi}
        written = [v is None or v in ends for v in scaled]
        return pos, labels, written
    text = col.cast(pl.String).fill_null("–").to_list()
    levels = sorted(set(text), key=lambda s: (s == "–", s))
    step = 1.0 / (len(levels) - 1) if len(levels) > 1 else 0.0
    return [0.5 if len(levels) == 1 else levels.index(t) * step for t in text], text, \
        [True] * len(text)


AXIS_SCHEMA = {"axis": pl.String, "order": pl.Int64, "pos": pl.Float64, "label": pl.String,
               "tick": pl.String}


def polylines(table: pl.DataFrame, axes: Sequence[str], ids: Mapping[str, pl.Series],
              names: Mapping[str, str] | None = None) -> pl.DataFrame:
    """THE parallel-coordinates builder (the Leaderboard's rows, Explore's runs): one polyline
    per row of ``table`` across ``axes`` -- the ``ids`` columns, then axis (``names`` or the
    column), order, pos in [0, 1], label, and tick: the label where the axis writes it (a
    level, or a numeric axis's extremes), else null."""
    parts = []
    for i, ax in enumerate(axes):
        pos, labels, written = axis_positions(table[ax], ax)
        parts.append(pl.DataFrame({
            **ids, "axis": [(names or {}).get(ax, ax)] * table.height,
            "order": [i] * table.height, "pos": pos, "label": labels,
            "tick": [t if w else None for t, w in zip(labels, written, strict=True)]},
            schema={**{k: v.dtype for k, v in ids.items()}, **AXIS_SCHEMA}))
    return pl.concat(parts) if parts else pl.DataFrame(
        schema={**{k: v.dtype for k, v in ids.items()}, **AXIS_SCHEMA})


def parallel_frame(board: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(row, variant, axis, order, pos, label, tick): one polyline per leaderboard row across
    the swept dimensions that vary, then the metric's mean and Δ% vs baseline."""
    if "row" not in board.columns:
        board = board.with_columns(row_labels(board))
    dims = dimension_columns(board)
    names = {**{d: d.removeprefix("gate_") for d in dims}, "mean": metric,
             "delta_pct": f"Δ% {metric}"}
    return polylines(board, [*dims, "mean", "delta_pct"],
                     {"row": board["row"].cast(pl.String),
                      "variant": board["variant"].cast(pl.String)}, names)


BEST_VS_BEST = ("variant", "LRs", "its best LR", "baseline's best LR", "judged at",
                "baseline judged at", "n", "Δ% best vs best [95% CI]", "CI", "verdict", "note")


def best_vs_best_display(frame: pl.DataFrame) -> pl.DataFrame:
    """db.best_vs_best as the strings the page shows: a row the design cannot support (one
    LR, one seed) keeps its words and shows no LR as "best" and no Δ."""
    def text(v: object) -> str:
        return "–" if v is None else str(v)

    return pl.DataFrame([{
        "variant": r["label"], "LRs": text(r["n_lrs"]), "its best LR": fmt_lr(r["best_lr"]),
        "baseline's best LR": fmt_lr(r["baseline_best_lr"]), "judged at": text(r["picks"]),
        "baseline judged at": text(r["baseline_picks"]), "n": text(r["n"]),
        "Δ% best vs best [95% CI]": fmt_delta_ci(r["delta_pct"], r["ci_low_pct"],
                                                 r["ci_high_pct"]),
        "CI": r["ci_method"] if r["ci_method"] not in (None, "none") else "–",
        "verdict": fmt_verdict(r["verdict"]), "note": text(r["note"])}
        for r in frame.iter_rows(named=True)], schema={c: pl.String for c in BEST_VS_BEST})
