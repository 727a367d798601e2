"""The leaderboard said in words, for the top of every leaderboard (CLI, dashboard)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from results_db.analysis.bestlr import LOSO, NO_BEST_LR, NOT_RUN, ONE_SEED
from results_db.analysis.columns import RULE
from results_db.analysis.multiplicity import rule_text
from results_db.schema.vocab import verdict_kind

if TYPE_CHECKING:
    import polars as pl


# verdict kind -> (verb for one, verb for many, the rest of the phrase), in sentence order
_PHRASES: tuple[tuple[str, str, str, str], ...] = (
    ("worse", "is", "are", "worse"),
    ("within noise", "is", "are", "within noise"),
    ("needs >= k seeds", "needs", "need", "more seeds"),
    ("inconclusive", "is", "are", "inconclusive (CI too wide, seeds as the power rule asks)"),
    ("n = 1", "has", "have", "a single seed (no CI)"),
    ("no data", "has", "have", "no value to compare"),
)


def board_rule(board: pl.DataFrame) -> str:
    """The multiplicity rule a leaderboard was judged by, in words (multiplicity.rule_text
    over its RULE columns); "95 % CI" for a frame without them."""
    if board.height == 0 or any(c not in board.columns for c in RULE):
        return "95 % CI"
    correction, alpha, family = (board[c][0] for c in RULE)
    return rule_text(str(correction), float(alpha), int(family or 0))


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def verdict_sentence(board: pl.DataFrame, sweep: str, metric: str) -> str:
    """"3 of 15 variants beat the baseline `baseline` beyond noise on val/ppl (95 % CI per
    row, no correction over 15 rows); 2 are worse; 6 are within noise; 4 need more seeds (up
    to 9); ..." -- counts over the non-baseline rows of ``board`` (a leaderboard), with the
    rule its verdicts were read by (board_rule); rows are (variant, lr) pairs when the sweep
    has an LR axis."""
    if board.height == 0:
        return f"Sweep {sweep}: no finished runs with a {metric} value yet."
    base = board["baseline"][0] if "baseline" in board.columns else None
    if base is None:
        return (f"Sweep {sweep}: no baseline (no variant is named 'baseline' and none is the "
                f"plain ungated model), so there are no deltas or verdicts on {metric}.")
    rows = board.filter(~board["is_baseline"])
    if rows.height == 0:
        return (f"Sweep {sweep}: only the baseline '{base}' has a {metric} value so far; "
                "nothing to compare with it yet.")
    kinds = [verdict_kind(v) for v in rows["verdict"].to_list()]
    unit = "variant × LR rows" if rows["lr"].n_unique() > 1 and \
        rows["variant"].n_unique() < rows.height else "variants"
    count = {k: kinds.count(k) for k in set(kinds)}
    parts = [f"{count.get('better', 0)} of {rows.height} {unit} beat the baseline '{base}' "
             f"beyond noise on {metric} ({board_rule(board)})"]
    extra = {"needs >= k seeds": f" (up to {rows['seeds_needed'].max()!s})"}
    for kind, one, many, what in _PHRASES:
        if n := count.get(kind, 0):
            parts.append(f"{n} {_plural(n, one, many)} {what}{extra.get(kind, '')}")
    return "; ".join(parts) + "."


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
