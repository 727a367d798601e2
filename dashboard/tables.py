"""Formatting for the dashboard's tables: numbers, Δ with its CI, row labels, paper labels.

Formatting only. Every statistic (baseline, means, deltas, CIs, verdicts, ranks) comes from
results_db's AnalysisMixin (db.leaderboard, db.ablation_table, db.effects, db.stability).
One number style everywhere: ``fmt_num`` (no column mixes exponent and fixed notation for
ordinary values), percentages with one decimal and a sign.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from contract import metrics
from contract.analysis_defaults import MIN_EFFECT
from contract.metrics import VAL_PPL
from dashboard.labels import activation_label, human_count, method_label, score_shape


def fmt_num(v: float | None) -> str:
    """Table numbers: 1053 -> '1053', 5.7612 -> '5.761', 0.0053 -> '0.00530',
    3.1e-5 -> '3.10e-05', 7.1e19 -> '7.10e+19', None/NaN -> '–'. Exponents only for
    magnitudes no table column mixes with ordinary ones (>= 1e6, < 1e-4)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    a = abs(v)
    if a >= 1e6 or (0 < a < 1e-4):
        return f"{v:.2e}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 0.01 or a == 0:
        return f"{v:.3f}"
    return f"{v:.5f}"


def fmt_printed(v: float | None) -> str:
    """A figure of the paper as it printed it: 94 -> '94', 1053 -> '1053', 0.048 -> '0.048'
    (fmt_num wrote its Table 4 M-Act column as '94.000' beside '1053')."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:g}"


def fmt_lr(v: float | None) -> str:
    """Learning rates as people write them: 0.003 -> '3e-3', 0.0004 -> '4e-4'."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    mant, exp = f"{v:.2e}".split("e")
    return f"{float(mant):g}e{int(exp)}"


def fmt_mean_std(mean: float | None, std: float | None) -> str:
    """'5.761 ± 0.012'; just the mean for one seed; '–' when there is no value."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "–"
    if std is None or math.isnan(std):
        return fmt_num(mean)
    text = fmt_num(mean)
    if "e" in text or not math.isfinite(std):
        return f"{text} ± {fmt_num(std)}"
    places = len(text.split(".")[1]) if "." in text else 0  # the std to the mean's precision
    return f"{text} ± {std:.{places}f}"


PCT_EXP = 1e5  # |Δ%| from here on in exponent notation: a 1e30 PPL is not 33 digits wide


def _signed(v: float) -> str:
    """A signed percentage number: '+2.4', '-10.8'; '+1.49e+31' past PCT_EXP."""
    return f"{v:+.2e}" if abs(v) >= PCT_EXP else f"{v:+.1f}"


def fmt_pct(v: float | None) -> str:
    """'-10.8%' / '+2.4%' / '+1.49e+31%' / '–'."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{_signed(v)}%"


def fmt_delta_ci(pct: float | None, lo: float | None, hi: float | None) -> str:
    """Δ% with its 95 % CI: '-10.8% [-12.1, -9.4]'; no CI (n = 1): '-10.8% (no CI)'."""
    if pct is None or (isinstance(pct, float) and not math.isfinite(pct)):
        return "–"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{fmt_pct(pct)} (no CI)"
    return f"{fmt_pct(pct)} [{_signed(lo)}, {_signed(hi)}]"


def fmt_abs_delta_ci(delta: float | None, lo: float | None, hi: float | None) -> str:
    """The absolute Δ with its 95 % CI, in the metric's units: '-0.231 [-0.305, -0.157]'."""
    if delta is None or (isinstance(delta, float) and not math.isfinite(delta)):
        return "–"

    def signed(v: float) -> str:
        text = fmt_num(v)
        return text if text.startswith(("-", "–")) or text in ("inf",) else f"+{text}"
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{signed(delta)} (no CI)"
    return f"{signed(delta)} [{signed(lo)}, {signed(hi)}]"


def fmt_verdict(verdict: str | None, min_effect: float = MIN_EFFECT) -> str:
    """The verdict as the page shows it: 'needs >= k seeds' says what k is for (an effect of
    ``min_effect``, db.leaderboard's default 1 %), so "-29.9 % ... needs >= 417 seeds" does
    not read as "this effect needs 417 seeds"."""
    if not verdict:
        return "–"
    if verdict.startswith("needs >="):
        return f"{verdict} for a ±{min_effect:.0%} effect"
    return verdict


# The metric picker's order: what a researcher ranks by first (validation and benchmark
# quality), then the mechanistic probes and stability, then training, parameters and cost.
METRIC_GROUPS: tuple[str, ...] = (metrics.VAL, metrics.BENCH, metrics.LONGCTX, metrics.PROBE,
                                  metrics.STABILITY, metrics.TRAIN, metrics.PARAMS, metrics.COST,
                                  metrics.DATA)


def metric_order(names: Sequence[str]) -> list[str]:
    """``names`` with val/ppl first, then by METRIC_GROUPS, alphabetical within a group."""
    def key(n: str) -> tuple[int, int, str]:
        group = next((i for i, p in enumerate(METRIC_GROUPS) if n.startswith(p)),
                     len(METRIC_GROUPS))
        return (group, 0 if n == VAL_PPL else 1, n)
    return sorted(names, key=key)


def row_labels(frame: pl.DataFrame) -> pl.Series:
    """The label of each (variant, lr) row: the variant, plus '@ lr=3e-3' wherever ``frame``
    holds more than one learning rate -- also on a variant run at one LR: a delta read without
    its LR (a one-LR variant at 3e-2, where the baseline was degraded) was misread as tuned."""
    lrs = frame["lr"].to_list() if "lr" in frame.columns else [None] * frame.height
    several = len(set(lrs)) > 1
    out = [f"{v} @ lr={fmt_lr(lr)}" if several else v
           for v, lr in zip(frame["variant"].to_list(), lrs, strict=True)]
    return pl.Series("row", out, dtype=pl.String)


def apply_filters(runs: pl.DataFrame, filters: Mapping[str, Sequence[Any]]) -> pl.DataFrame:
    """Keep rows whose column value is in the chosen values (an empty choice = no filter);
    '–' chooses the rows without a value (e.g. the ungated ones for gate_position)."""
    for col, values in filters.items():
        if values and col in runs.columns:
            as_text = pl.col(col).cast(pl.String).fill_null("–")
            runs = runs.filter(as_text.is_in([str(v) for v in values]))
    return runs


def label_columns(row: Mapping[str, Any]) -> dict[str, str]:
    """The paper's first columns for one variant row: Method, Act, Score shape."""
    return {"Method": method_label(row, str(row["variant"])), "Act": activation_label(row),
            "Score shape": score_shape(row)}


def params_label(row: Mapping[str, Any], baseline_total: int | None = None) -> str:
    """Parameters the variant adds: its gates', or, for a variant without gate parameters
    (more kv/q heads, more experts, SwitchHead), its total minus the baseline's total, as the
    paper's "Added (M)" column counts them."""
    gates = row.get("params_gates")
    total = row.get("params_total")
    if not gates and total is not None and baseline_total is not None:
        return human_count(max(int(total) - int(baseline_total), 0))
    return human_count(gates)
