"""AnalysisMixin: the ResultsDB methods that turn stored runs into conclusions.

Reads go through results_db/frames.py (the SQL); every rule is in this package's pure
modules: baseline.py (which variant is the reference), compare.py (groups, matching, CIs,
verdicts), effects.py (main effects), stability.py (LR stability). Every surface -- the CLI,
the dashboard, benchmarks/reproduction_table.py -- calls these methods or those functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from results_db.analysis.baseline import pick_baseline
from results_db.analysis.compare import compare, rank, varying
from results_db.analysis.effects import main_effects
from results_db.analysis.stability import EXTRA_METRICS, Stability, analyse
from results_db.analysis.summary import verdict_sentence
from results_db.vocab import RESULT_STATES, higher_is_better

if TYPE_CHECKING:
    import polars as pl
    from sqlalchemy import Engine

ABLATION_METRICS: tuple[str, ...] = (
    "val/ppl", "val/loss", "probe/first_token_attention", "probe/max_activation",
    "probe/gate_score_mean", "stability/loss_spikes")
# Leaderboard columns in contract order; the dimension columns that vary go after "lr".
HEAD = ("rank", "variant", "lr")
STATS = ("n", "mean", "std", "is_baseline", "delta", "delta_pct", "ci_low", "ci_high",
         "ci_low_pct", "ci_high_pct", "ci_method", "verdict", "seeds_needed")
TAIL = ("metric", "baseline", "n_diverged", "group_key", "lr_group_key", "params_total",
        "params_gates")


class AnalysisMixin:
    reader: Engine

    def baseline(self, sweep: str) -> str | None:
        """The sweep's baseline variant (results_db.analysis.baseline.pick_baseline) over all
        its runs, whatever their state; None when no variant qualifies."""
        from results_db.frames import BASELINE_COLUMNS

        runs = self.runs(sweep=sweep, with_config=False,  # type: ignore[attr-defined]
                         columns=BASELINE_COLUMNS)
        return pick_baseline(runs)

    def _compare(self, sweep: str, metric: str, min_effect: float, states: Sequence[str],
                 higher: bool) -> pl.DataFrame:
        from results_db.frames import run_values

        values = run_values(self.reader, sweep, [metric])
        return compare(values, metric, self.baseline(sweep), states=states,
                       min_effect=min_effect, higher=higher)

    def _compare_many(self, sweep: str, metrics: Sequence[str], min_effect: float,
                      states: Sequence[str]) -> list[pl.DataFrame]:
        """compare() per metric over one read of the runs and one baseline decision."""
        from results_db.frames import run_values

        values = run_values(self.reader, sweep, list(metrics))
        base = self.baseline(sweep)
        return [compare(values, m, base, states=states, min_effect=min_effect,
                        higher=higher_is_better(m)) for m in metrics]

    def leaderboard(self, sweep: str, metric: str = "val/ppl", *, min_effect: float = 0.01,
                    states: Sequence[str] = RESULT_STATES,
                    ascending: bool | None = None) -> pl.DataFrame:
        """One row per (variant, learning rate) seed group, best first: rank, variant, lr,
        the dimension columns that vary, n, mean, std, is_baseline, delta, delta_pct,
        ci_low/high(_pct), ci_method, verdict, seeds_needed, then metric, baseline,
        n_diverged, group_key, lr_group_key, params_total, params_gates.
        ``ascending`` None: the metric's own direction (lower is better but for benchmark
        scores and accuracies); False ranks and judges higher-is-better."""
        import polars as pl

        higher = higher_is_better(metric) if ascending is None else not ascending
        t = self._compare(sweep, metric, min_effect, states, higher)
        t = t.with_columns(rank=rank(t, higher))
        cols = [*HEAD, *varying(t), *STATS, *TAIL]
        return t.select(cols).sort(pl.col("rank"), "variant", "lr", nulls_last=True)

    def verdict_summary(self, sweep: str, metric: str = "val/ppl", *,
                        min_effect: float = 0.01) -> str:
        """The leaderboard in one sentence: "3 of 15 variants beat the baseline beyond
        noise; ..." (results_db/analysis/summary.py)."""
        board = self.leaderboard(sweep, metric, min_effect=min_effect)
        return verdict_sentence(board, sweep, metric)

    def ablation_table(self, sweep: str, metrics: Sequence[str] = ABLATION_METRICS, *,
                       min_effect: float = 0.01,
                       states: Sequence[str] = RESULT_STATES) -> pl.DataFrame:
        """One row per seed group (baseline first, then declared order): variant, lr, all
        dimension columns, n, n_diverged, is_baseline, and per metric ``<m>:<column>`` for
        n, mean, std, delta, delta_pct, ci_low/high(_pct), ci_method, verdict, seeds_needed,
        plus ``<m>:text`` ("12.3 ± 0.41"). With an LR axis, the ladder's max_stable_lr."""
        from results_db.analysis.table import ablation

        if not metrics:
            raise ValueError("ablation_table: metrics is empty; give at least one name")
        stab = self.stability(sweep)
        return ablation(self._compare_many(sweep, metrics, min_effect, states), list(metrics),
                        None if stab is None else stab.summary)

    def effects(self, sweep: str, metric: str = "val/ppl", *, min_effect: float = 0.01,
                states: Sequence[str] = RESULT_STATES) -> pl.DataFrame:
        """Main effects: per (dimension, value), the mean delta % over the other dimensions
        with a 95 % CI (results_db/analysis/effects.py): dimension, value, n_variants,
        n_runs, mean_delta_pct, ci_low_pct, ci_high_pct, verdict."""
        higher = higher_is_better(metric)
        return main_effects(self._compare(sweep, metric, min_effect, states, higher), higher)

    def stability(self, sweep: str, metric: str = "val/loss",
                  tol: float = 0.05) -> Stability | None:
        """LR stability (results_db/analysis/stability.py): ``.curve`` per (variant, lr),
        ``.summary`` per variant (most stable first), ``.rule``; None when no variant of the
        sweep ran at more than one learning rate."""
        st = self._stability(sweep, metric, tol)
        return st if st.summary.height and st.summary["n_lrs"].max() > 1 else None

    def _stability(self, sweep: str, metric: str, tol: float) -> Stability:
        from results_db.frames import run_values, wide_values

        wide = wide_values(run_values(self.reader, sweep, [metric, *EXTRA_METRICS]))
        return analyse(_with_columns(wide, [metric, *EXTRA_METRICS]), metric, tol)

    def max_stable_lr(self, sweep: str, tolerance: float = 0.05,
                      metric: str = "val/loss") -> pl.DataFrame:
        """Per LR ladder (also with a single LR): the stability summary -- lr_group_key,
        variant, best_lr, best_value, max_stable_lr, n_lrs, lrs, min_diverged_lr,
        value_at_max, top_lr, rel_at_top_lr."""
        return self._stability(sweep, metric, tolerance).summary


def _with_columns(df: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    import polars as pl

    return df.with_columns(pl.lit(None, pl.Float64).alias(n) for n in names
                           if n not in df.columns)
