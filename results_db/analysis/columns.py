"""THE column schema of the leaderboard (``db.leaderboard``; compare.py computes the statistics).

Each statistic is one row here: its name, its polars dtype and how a human table shows it.
compare.py casts its output to these dtypes and api.py orders the leaderboard by them; the
formatters read the schema instead of listing names (orchestrator/cli/results.py picks the
human columns from ``shown``; the dashboard finds the dimension columns before the first
statistic). Adding a statistic is its computation in compare.py and its row here; a formatter
that shows it specially (the dashboard's page) is the one other place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stat:
    name: str
    dtype: str  # polars dtype name (pl.Int64, pl.Float64, ...: getattr(pl, dtype))
    # the human formats' cell (table, markdown, latex): its column there, "ci" for the two bounds
    # of the 95 % CI shown as one "[lo, hi] %"; None: machine formats (csv, json) only
    shown: str | None


STATS: tuple[Stat, ...] = (
    Stat("n", "Int64", "n"),  # finite values of the metric over the runs in the states asked
    Stat("mean", "Float64", "mean"),
    Stat("std", "Float64", "std"),  # ddof 1
    Stat("is_baseline", "Boolean", None),
    Stat("delta", "Float64", None),  # mean - the baseline's, in the metric's units
    Stat("delta_pct", "Float64", "delta_pct"),  # percentages: of |baseline mean|
    Stat("ci_low", "Float64", None),
    Stat("ci_high", "Float64", None),
    Stat("ci_low_pct", "Float64", "ci"),
    Stat("ci_high_pct", "Float64", "ci"),
    Stat("ci_method", "String", None),  # paired | welch
    Stat("verdict", "String", "verdict"),  # results_db.schema.vocab.VERDICTS
    Stat("seeds_needed", "Int64", "seeds_needed"),  # to resolve min_effect
    # what pairing the seeds bought (pairing.py; paired rows with >= 3 seeds): the correlation
    # of baseline and variant over the seeds, and the measured variance ratio it is worth
    Stat("pair_corr", "Float64", "pair_corr"),
    Stat("seed_multiplier", "Float64", "seed_multiplier"),
    Stat("ci_level", "Float64", None),  # the CI's confidence level (multiplicity.row_level)
    Stat("p_value", "Float64", None),  # two-sided t-test of "no change" (same t and df as the CI)
)
STAT_COLUMNS: tuple[str, ...] = tuple(s.name for s in STATS)
FIRST_STAT = STAT_COLUMNS[0]  # the dimension columns that vary sit between "lr" and it

# The leaderboard's columns around the statistics: rank and labels first, the dimension
# columns that vary after "lr", then STATS, then the group's bookkeeping.
HEAD: tuple[str, ...] = ("rank", "variant", "lr")
# The multiplicity rule behind every verdict of the table (multiplicity.py): the same value on
# every row, so a frame carries the rule it was judged by.
RULE: tuple[str, ...] = ("correction", "family_error", "family")
# The baseline's condition at the row's LR (untuned.py): "vs an untuned baseline (41.7 % worse
# than at its best LR 1e-2)", null where the baseline is tuned there.
CONDITION = "condition"
TAIL: tuple[str, ...] = (CONDITION, "metric", "baseline", "n_diverged", "group_key", "lr_group_key",
                         "params_total", "params_gates", "seeds_observed", *RULE)
# The study's answers (findings.py), one row per question and variant.
ROW_COLUMNS = ("question", "variant", "estimate", "verdict", "LR", "seeds", "step", "note",
               "rule")


def shown_columns() -> list[str]:
    """The leaderboard's columns in a human table: HEAD, then each statistic's cell once,
    then the baseline's condition at the row's LR."""
    return [*HEAD, *dict.fromkeys(s.shown for s in STATS if s.shown), CONDITION]
