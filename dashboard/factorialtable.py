"""THE 2x2 factorial as text (db.factorial): the four cells as a grid -- rows the first factor
off / on, columns the second -- each cell its variant, Δ% vs the baseline with its CI and
verdict (the leaderboard's row), and beside it the two main effects and the interaction with
their CIs, Bonferroni over the 3 (anytime-valid in a ``decide:`` sweep read by its rule). The
captions say which intervals they are (``Factorial.cell_rule`` and ``.rule``, results_db's
words). The Ablation tables page and the sweep report both show these frames, so a cell cannot
be worded two ways. Formatting only: results_db computes every number (no streamlit here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from dashboard.tables import fmt_delta_ci, fmt_verdict

if TYPE_CHECKING:
    from results_db.analysis.factorial import Factorial

CONTRAST, DELTA, VERDICT, SEEDS = "Contrast", "Δ% [CI]", "Verdict", "Seeds"


@dataclass(frozen=True)
class FactorialText:
    title: str  # "2x2: sparse x gated"
    sentence: str  # db.factorial's, what is decided
    grid: pl.DataFrame  # one row per level of the first factor (per context), a column per level
    effects: pl.DataFrame  # Contrast, Δ% [CI], Verdict, Seeds
    grid_caption: str
    effects_caption: str


def _cell(row: dict[str, Any]) -> str:
    """'nsa_equal: +2.10% [+1.92, +2.27] worse'; the baseline cell names itself."""
    if row["verdict"] == "baseline":
        return f"{row['variant']} (baseline)"
    delta = fmt_delta_ci(row["delta_pct"], row["ci_low_pct"], row["ci_high_pct"])
    return f"{row['variant']}: {delta} {fmt_verdict(row['verdict'])}"


def _grid(fac: Factorial) -> pl.DataFrame:
    a, b = fac.design.a.name, fac.design.b.name
    several = fac.cells["context"].n_unique() > 1
    rows = []
    for ctx in dict.fromkeys(fac.cells["context"].to_list()):
        here = fac.cells.filter(pl.col("context") == ctx)
        for level in ("off", "on"):
            cells = {r["b"]: _cell(r) for r in here.filter(pl.col("a") == level)
                     .iter_rows(named=True)}
            row = {"": f"{a} {level}", f"{b} off": cells["off"], f"{b} on": cells["on"]}
            rows.append({"context": ctx, **row} if several else row)
    return pl.DataFrame(rows)


def _effects(fac: Factorial) -> pl.DataFrame:
    several = fac.effects["context"].n_unique() > 1
    rows = []
    for r in fac.effects.iter_rows(named=True):
        # the interaction is named "A x B"; a main effect by its factor
        name = r["contrast"] if r["kind"] == "interaction" else f"{r['contrast']} (main)"
        seeds = str(r["n_seeds"]) + (f" (-{r['seeds_dropped']})" if r["seeds_dropped"] else "")
        row = {CONTRAST: name, DELTA: fmt_delta_ci(r["estimate_pct"], r["ci_low_pct"],
                                                   r["ci_high_pct"]),
               VERDICT: fmt_verdict(r["verdict"]), SEEDS: seeds}
        rows.append({"context": r["context"], **row} if several else row)
    return pl.DataFrame(rows)


def factorial_text(fac: Factorial) -> FactorialText | None:
    """The frames and words of ``fac``; None when the sweep has no such 2x2 (nothing shown)."""
    if not fac.found:
        return None
    return FactorialText(
        title=f"2x2: {fac.design.name}", sentence=fac.sentence(), grid=_grid(fac),
        effects=_effects(fac),
        grid_caption=(f"Each cell: Δ {fac.metric} vs the baseline, its CI and verdict, the "
                      f"leaderboard's row ({fac.cell_rule}); {fac.design.text()}."),
        effects_caption=(f"Main effects and the interaction (A x B), per seed over the seeds "
                         f"every cell ran (Seeds: n, -dropped), % of the baseline mean "
                         f"({fac.rule})."))
