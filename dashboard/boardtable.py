"""THE leaderboard table as text: db.leaderboard's rows as the strings every surface shows --
the dashboard's Leaderboard page and the sweep report (dashboard/report/content.py) select their
columns from this one frame, so a cell cannot be worded two ways. Formatting only: results_db
computes every number (no streamlit here)."""

from __future__ import annotations

import polars as pl

from dashboard.tables import (
    fmt_abs_delta_ci,
    fmt_delta_ci,
    fmt_lr,
    fmt_mean_std,
    fmt_num,
    fmt_verdict,
    row_labels,
)
from results_db.analysis.columns import CONDITION, FIRST_STAT
from results_db.schema.vocab import verdict_kind

# The Δ columns' headers. The interval is the board's rule's -- 95 %, Bonferroni 99.6 %, an
# anytime-valid one on a decide board -- so the header says "CI" and the caption names which.
DELTA_PCT, DELTA = "Δ% [CI]", "Δ [CI]"


def display_frame(board: pl.DataFrame, url_of: dict[str, str] | None = None,
                  cost: dict[str, dict[str, float]] | None = None) -> pl.DataFrame:
    """The ranked frame as the strings shown on the page (and checked by the tests): the
    static columns, the cost columns (``cost``: {column: {group_key: mean}}), then the
    dimension columns db.leaderboard reports as varying. "seeds for Δ": seeds per variant
    that would confirm the *observed* Δ (db.leaderboard's seeds_observed), shown where the
    verdict is not yet better/worse."""
    if "row" not in board.columns:
        board = board.with_columns(row_labels(board))
    lo = board.columns.index("lr") + 1 if "lr" in board.columns else 2
    dims = board.columns[lo:board.columns.index(FIRST_STAT)]
    if "lr" in board.columns and board["lr"].n_unique() > 1:
        dims = ["lr", *dims]  # every row's LR, also a variant's only one (its condition)
    rows = []
    for r in board.iter_rows(named=True):
        row = {"rank": "" if r["rank"] is None else str(r["rank"]),
               "variant": r["row"] + (" (baseline)" if r["is_baseline"] else "")}
        if url_of is not None:
            row["runs"] = url_of.get(r["group_key"], "")
        row.update({"mean ± std": fmt_mean_std(r["mean"], r["std"]), "n": str(r["n"]),
                    DELTA_PCT: "–" if r["is_baseline"] else
                    fmt_delta_ci(r["delta_pct"], r["ci_low_pct"], r["ci_high_pct"]),
                    DELTA: "–" if r["is_baseline"] else
                    fmt_abs_delta_ci(r["delta"], r["ci_low"], r["ci_high"]),
                    "verdict": fmt_verdict(r["verdict"]),
                    # the baseline's condition at the row's LR (untuned.py): a "better" vs an
                    # untuned baseline is a detail, never a headline
                    CONDITION: r.get(CONDITION) or "–",
                    "seeds for Δ": _seeds_for_delta(r)})
        for col, per in (cost or {}).items():
            row[col] = fmt_num(per.get(r["group_key"]))
        for c in dims:  # gate_position -> position: narrower, the page says they are gates
            v = r[c]
            row[c.removeprefix("gate_")] = "–" if v is None else \
                (fmt_lr(v) if c == "lr" else str(v))
        rows.append(row)
    if not rows:
        return pl.DataFrame(schema={"variant": pl.String})
    frame = pl.DataFrame(rows)
    # what a reader needs on a laptop's first screen: the row, its LR, Δ with its CI and
    # verdict, and its cost; the rest after (the grid scrolls sideways)
    first = [c for c in (*FIRST_COLUMNS[:5], "lr", *FIRST_COLUMNS[5:], *(cost or {}))
             if c in frame.columns]
    return frame.select([*first, *[c for c in frame.columns if c not in first]])


FIRST_COLUMNS = ("rank", "variant", "mean ± std", "n", DELTA_PCT, "verdict")


def _seeds_for_delta(r: dict) -> str:
    k = r.get("seeds_observed")
    if r["is_baseline"] or k is None or verdict_kind(r["verdict"]) in ("better", "worse"):
        return "–"
    return f">= {k}"
