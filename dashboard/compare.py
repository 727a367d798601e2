"""Run comparison as researchers do it in W&B / MLflow compare: parallel coordinates over the
swept dimensions, and each variant at its own best LR against the baseline at *its* best LR
(the statistic is results_db.analysis.bestlr.best_vs_best; here only its display).

Pure polars over frames the pages already read (db.leaderboard, the runs, their summaries).
"""

from __future__ import annotations

import math

import polars as pl

from dashboard.tables import fmt_delta_ci, fmt_lr, fmt_num, fmt_pct, row_labels


def dimension_columns(board: pl.DataFrame) -> list[str]:
    """db.leaderboard's dimension columns (between ``variant`` and ``n``) that vary."""
    lo = board.columns.index("variant") + 1
    dims = board.columns[lo:board.columns.index("n")]
    return [c for c in dims if board[c].cast(pl.String).fill_null("–").n_unique() > 1]


def _positions(col: pl.Series, name: str) -> tuple[list[float], list[str]]:
    """Axis positions in [0, 1] and labels: numbers min-max (the LR on log10), anything else
    its sorted distinct values evenly spaced ('–' for no value)."""
    if col.dtype.is_numeric():
        vals = [None if v is None or not math.isfinite(v) else float(v) for v in col.to_list()]
        scaled = [None if v is None else (math.log10(v) if name == "lr" and v > 0 else v)
                  for v in vals]
        known = [v for v in scaled if v is not None]
        lo, hi = (min(known), max(known)) if known else (0.0, 1.0)
        span = hi - lo or 1.0
        pos = [0.5 if v is None or hi == lo else (v - lo) / span for v in scaled]
        labels = [("–" if v is None else fmt_lr(v) if name == "lr" else
                   fmt_pct(v) if name == "delta_pct" else fmt_num(v)) for v in vals]
        return pos, labels
    text = col.cast(pl.String).fill_null("–").to_list()
    levels = sorted(set(text), key=lambda s: (s == "–", s))
    step = 1.0 / (len(levels) - 1) if len(levels) > 1 else 0.0
    return [0.5 if len(levels) == 1 else levels.index(t) * step for t in text], text


def parallel_frame(board: pl.DataFrame, metric: str) -> pl.DataFrame:
    """(row, variant, axis, order, pos, label): one polyline per leaderboard row across the
    swept dimensions that vary, then the metric's mean and Δ% vs baseline."""
    if "row" not in board.columns:
        board = board.with_columns(row_labels(board))
    axes = [*dimension_columns(board), "mean", "delta_pct"]
    names = {"mean": metric, "delta_pct": f"Δ% {metric}"}
    parts = []
    for i, ax in enumerate(axes):
        pos, labels = _positions(board[ax], ax)
        parts.append(pl.DataFrame({
            "row": board["row"], "variant": board["variant"],
            "axis": [names.get(ax, ax.removeprefix("gate_"))] * board.height,
            "order": [i] * board.height, "pos": pos, "label": labels},
            schema={"row": pl.String, "variant": pl.String, "axis": pl.String,
                    "order": pl.Int64, "pos": pl.Float64, "label": pl.String}))
    return pl.concat(parts) if parts else pl.DataFrame()


def best_vs_best_display(frame: pl.DataFrame) -> pl.DataFrame:
    """best_vs_best as the strings the page shows."""
    return pl.DataFrame([{
        "variant": r["variant"], "its best LR": fmt_lr(r["best lr"]),
        "baseline's best LR": fmt_lr(r["baseline best lr"]), "n": str(r["n"]),
        "Δ% best vs best [95% CI]": fmt_delta_ci(r["delta_pct"], r["ci_low_pct"],
                                                 r["ci_high_pct"]),
        "CI": r["ci_method"] if r["ci_method"] != "none" else "–"}
        for r in frame.iter_rows(named=True)], schema={
        c: pl.String for c in ("variant", "its best LR", "baseline's best LR", "n",
                               "Δ% best vs best [95% CI]", "CI")})
