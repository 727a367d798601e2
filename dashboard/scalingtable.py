"""db.scaling's trends as the strings a table shows, for the Scaling page and the report's
first page (one formatter): the LR of every row and the step of every reading -- the end of
training for a trend over tokens, mid-training for the change at equal compute ("step 200 of
400, equal FLOPs"), never under "at end" -- the change with the CI its reading has, the trend
(slope per decade) apart with its own CI, and whose verdict the verdict is (a slope's
"inconclusive" beside a final change whose CI excludes 0 read as a contradiction)."""

from __future__ import annotations

from typing import Any

import polars as pl

from dashboard.tables import fmt_delta_ci, fmt_lr, fmt_pct

X_WORDS = {"tokens": "tokens", "params": "parameters", "flops": "FLOPs",
           "iso_flops": "equal compute"}
# the verdict beside the row's name: as the last column it ran past the table's edge, cut
COLUMNS = ("variant", "lr", "size", "read at", "Δ% [95% CI]", "verdict", "trend [95% CI]",
           "FLOPs/token vs baseline", "seeds")


def _interval(lo: float | None, hi: float | None) -> str:
    return "" if lo is None or hi is None else f" [{lo:+.2f}, {hi:+.2f}]"


def read_at(r: dict[str, Any]) -> str:
    """Where a trends row's change was read: its step and, mid-training, why."""
    step, last = r.get("step"), r.get("last_step")
    if r["x"] == "iso_flops":
        return f"step {step} of {last}, equal FLOPs" if step is not None else "equal FLOPs"
    if r["x"] == "tokens":
        return f"end of training (step {step})" if step is not None else "end of training"
    return "each size's last step"


def trend_text(r: dict[str, Any]) -> str:
    """'-3.10 pp per decade of tokens [-5.20, -1.00]' ('–' for a reading without a slope)."""
    if r["x"] == "iso_flops" or r["slope"] is None:
        return "–"
    return (f"{r['slope']:+.2f} pp per decade of {X_WORDS.get(r['x'], r['x'])}"
            + _interval(r["slope_ci_low"], r["slope_ci_high"]))


def trend_table(trends: pl.DataFrame) -> pl.DataFrame:
    """COLUMNS, one row per trends row; '–' where there is no value."""
    out = []
    for r in trends.iter_rows(named=True):
        whose = "" if r["x"] == "iso_flops" or not r["verdict"] else "trend "
        out.append({"variant": str(r["variant"]), "lr": fmt_lr(r["lr"]),
                    "size": str(r["size"] or "across sizes"), "read at": read_at(r),
                    "Δ% [95% CI]": fmt_delta_ci(r["delta_pct_to"], r["ci_low_pct"],
                                                r["ci_high_pct"]),
                    "verdict": whose + str(r["verdict"] or "–"),
                    "trend [95% CI]": trend_text(r),
                    "FLOPs/token vs baseline": fmt_pct(r["flops_overhead_pct"]),
                    "seeds": str(r["n_seeds"])})
    return pl.DataFrame(out, schema=dict.fromkeys(COLUMNS, pl.String))
