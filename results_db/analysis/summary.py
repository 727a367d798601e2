"""Tables said in words: the rule a leaderboard was judged by, the main effects, best vs best.
The study's headline answers are findings.py's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from results_db.analysis.columns import RULE
from results_db.analysis.labels import LOSO, NO_BEST_LR, NOT_RUN, ONE_SEED
from results_db.analysis.multiplicity import rule_text

if TYPE_CHECKING:
    import polars as pl


def board_rule(board: pl.DataFrame) -> str:
    """The multiplicity rule a leaderboard was judged by, in words (multiplicity.rule_text
    over its RULE columns); "95 % CI" for a frame without them."""
    if board.height == 0 or any(c not in board.columns for c in RULE):
        return "95 % CI"
    correction, alpha, family = (board[c][0] for c in RULE)
    return rule_text(str(correction), float(alpha), int(family or 0))


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


_EFFECT_COUNTS: tuple[tuple[str, str], ...] = (
    ("within noise", "within noise"), ("inconclusive", "inconclusive"),
    ("no CI", "without a CI (no residual df)"), ("not estimable", "not estimable"),
    ("one variant", "seen in one variant only (not a main effect)"),
)


def _signed(v: float | None) -> str:
    return "?" if v is None else f"{v:+.2f}"


def effects_sentence(effects: pl.DataFrame, sweep: str, metric: str) -> str:
    """The main-effects table (effects.py) in words, per context (learning rate): the
    levels whose CI excludes 0 by name with their change and CI, the others counted:
    "Main effects on val/ppl (OLS, 95 % CI), at lr 0.01: gate_position=G1 better -1.20 %
    [-1.80, -0.60]; 2 levels within noise; 3 seen in one variant only (not a main effect)."
    """
    if effects.height == 0:
        return (f"Sweep {sweep}: no dimension takes two values among the variants compared "
                f"with the baseline, so there are no main effects on {metric}.")
    parts = []
    for ctx in dict.fromkeys(effects["context"].to_list()):
        rows = [r for r in effects.iter_rows(named=True) if r["context"] == ctx]
        called = [f"{r['dimension']}={r['value']} {r['verdict']} "
                  f"{_signed(r['mean_delta_pct'])} % [{_signed(r['ci_low_pct'])}, "
                  f"{_signed(r['ci_high_pct'])}]"
                  for r in rows if r["verdict"] in ("better", "worse")]
        counts = []
        for kind, what in _EFFECT_COUNTS:
            if n := sum(r["verdict"] == kind for r in rows):
                counts.append(f"{n} {_plural(n, 'level', 'levels')} {what}")
        body = "; ".join(called + counts) or "nothing to say"
        if not called:
            body = "no level beats or trails the baseline beyond noise; " + body
        parts.append(f"at {ctx}: {body}" if ctx else body)
    return f"Main effects on {metric} (OLS over the runs, 95 % CI), " + "; ".join(parts) + "."


def best_vs_best_sentence(frame: pl.DataFrame, sweep: str, metric: str) -> str:
    """db.best_vs_best in one sentence with how the LRs were chosen: "Sweep s, each variant
    at its best LR vs the baseline at its own on val/ppl (each seed judged at the LR its
    other seeds pick, 95 % CI): 1 better; 8 with no best LR (run at one LR)." """
    if frame.height == 0:
        return (f"Sweep {sweep}: no baseline with a {metric} value, so no best-vs-best "
                "comparison.")
    how = ("each seed judged at the LR its other seeds pick" if frame["selection"][0] == LOSO
           else f"both at the {frame['selection'][0]}")
    counts = frame["verdict"].value_counts(sort=True).rows()
    words = {NO_BEST_LR: "with no best LR (run at one LR)",
             ONE_SEED: "with one seed (no held-out pick)", NOT_RUN: "not run at that LR"}
    parts = [f"{n} {words.get(v, v)}" for v, n in counts]
    return (f"Sweep {sweep}, each variant at its best LR vs the baseline at its own on "
            f"{metric} ({how}, 95 % CI): " + "; ".join(parts) + ".")
