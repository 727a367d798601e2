"""AnalysisMixin: the ResultsDB methods that turn stored runs into conclusions.

Reads go through results_db/read/frames.py (the SQL); every rule is in this package's pure
modules: baseline.py (which variant is the reference), compare.py (groups, matching, CIs,
verdicts), effects.py (main effects), factorial.py (a 2x2's cells and contrasts),
stability.py (LR stability). Every surface -- the CLI,
the dashboard, benchmarks/reproduction_table.py -- calls these methods or those functions.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from contract.analysis_defaults import (
    CORRECTION,
    FAMILY_ERROR,
    METRIC,
    MIN_EFFECT,
    STABILITY_METRIC,
    STABILITY_TOL,
)
from contract.config import RunSpec
from contract.flops import flops_per_token
from contract.metrics import (
    FIRST_TOKEN_ATTENTION,
    GATE_SCORE_MEAN,
    LOSS_SPIKES,
    MAX_ACTIVATION,
    VAL_LOSS,
    VAL_PPL,
)
from contract.params import count
from contract.states import DONE_OK, RunStatus
from results_db.analysis.baseline import pick_baseline
from results_db.analysis.bestlr import best_vs_best, declared_check
from results_db.analysis.columns import HEAD, STAT_COLUMNS, TAIL
from results_db.analysis.compare import compare, rank, varying
from results_db.analysis.decide_rule import METHOD, DecideRule
from results_db.analysis.effects import main_effects
from results_db.analysis.factorial import DESIGNS, Design, Factorial, factorial
from results_db.analysis.findings import Findings, at_tuned, findings, scale_axes, tuned_lrs
from results_db.analysis.scaling import Scaling, scaling
from results_db.analysis.sequential import (
    Spent,
    onto_board,
    read_rows,
    sentence,
    spent,
)
from results_db.analysis.stability import EXTRA_METRICS, Stability, analyse
from results_db.analysis.summary import effects_sentence
from results_db.analysis.table import ablation
from results_db.analysis.untuned import CONDITION, baseline_conditions
from results_db.read.frames import RUN_KEYS, first_runs, group_info, runs_wide, sweep_attempts
from results_db.schema.vocab import RESULT_STATES, higher_is_better

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sqlalchemy import Engine

    from results_db.write.decide_records import RuleChange

ABLATION_METRICS: tuple[str, ...] = (
    VAL_PPL, VAL_LOSS, FIRST_TOKEN_ATTENTION, MAX_ACTIVATION, GATE_SCORE_MEAN, LOSS_SPIKES)
# What compare.py and stability.py read of each run (frames.RUN_KEYS: fewer cells, faster).
COMPARE_KEYS = ("run_id", "group_key", "seed", "status")
LADDER_KEYS = ("run_id", "lr_group_key", "variant", "lr", "seed", "status")


class AnalysisMixin:
    if TYPE_CHECKING:  # what ResultsDB mixes in beside this class
        @property
        def reader(self) -> Engine: ...
        # results_db/read/query.py's ReaderMixin (mypy holds these to its signatures in ResultsDB)
        def metrics(self, run_ids: Sequence[int] | None = None,
                    names: Sequence[str] | None = None,
                    max_points: int | None = None) -> pl.DataFrame: ...

        def runs(self, sweep: str | None = None, status: str | Iterable[str] | None = None, *,
                 with_config: bool = True, columns: Sequence[str] | None = None,
                 **dims: Any) -> pl.DataFrame: ...

        # results_db/write/decide_records.py's DecideRecordsMixin
        def rule_changes(self, sweep: str) -> list[RuleChange]: ...
        def pair_order(self, sweep: str) -> dict[tuple[str, int], int]: ...
        def settled(self, sweep: str, rule_version: int) -> dict[str, dict[str, Any]]: ...
        def record_look(self, sweep: str, pairs: list[tuple[str, int]],
                        readings: list[dict[str, Any]], rule_version: int) -> int: ...

    def baseline(self, sweep: str) -> str | None:
        """The sweep's baseline variant (results_db.analysis.baseline.pick_baseline) over all
        its runs, whatever their state; None when no variant qualifies. The rule looks at
        each variant's first run only, so only those are read."""

        return pick_baseline(first_runs(self.reader, sweep))

    def _read(self, sweep: str, metrics: Sequence[str], stability: bool = False,
              states: Collection[str] = DONE_OK) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(runs x metrics, wide, of the runs in ``states``; the seed groups' labels): one
        read serves every table; the LR ladders' columns only when ``stability`` needs them."""

        keys = RUN_KEYS if stability else COMPARE_KEYS
        return (runs_wide(self.reader, sweep, metrics, states=states, keys=keys),
                group_info(self.reader, sweep))

    def leaderboard(self, sweep: str, metric: str = METRIC, *, min_effect: float = MIN_EFFECT,
                    states: Sequence[str] = RESULT_STATES, ascending: bool | None = None,
                    correction: str = CORRECTION, family_error: float = FAMILY_ERROR,
                    decide: DecideRule | None = None) -> pl.DataFrame:
        """One row per (variant, learning rate) seed group, best first: rank, variant, lr,
        the dimension columns that vary, n, mean, std, is_baseline, delta, delta_pct,
        ci_low/high(_pct), ci_method, verdict, seeds_needed, ci_level, p_value, then metric,
        baseline, n_diverged, group_key, lr_group_key, params_total, params_gates,
        seeds_observed (seeds_needed for the observed effect |delta| instead of min_effect),
        correction, family_error, family (the multiplicity rule: multiplicity.py; default
        each CI at 95 %, no correction). ``ascending`` None: the metric's own direction
        (lower is better but for benchmark scores and accuracies); False ranks and judges
        higher-is-better. ``decide``: the sweep's ``decide:`` rule; on its metric the rows are
        read by it (sequential.onto_board: anytime-valid, its one rule), not by fixed-n t
        intervals."""
        higher = higher_is_better(metric) if ascending is None else not ascending
        runs, info = self._read(sweep, [metric])
        return self._board(sweep, metric, runs, info, higher, min_effect=min_effect,
                           states=states, correction=correction, family_error=family_error,
                           decide=decide)

    def _board(self, sweep: str, metric: str, runs: pl.DataFrame, info: pl.DataFrame,
               higher: bool, *, min_effect: float, states: Sequence[str], correction: str,
               family_error: float, decide: DecideRule | None) -> pl.DataFrame:
        """The leaderboard from one read (``_read``): every surface that shows its rows
        (db.leaderboard, db.factorial's cells) builds them here, so they cannot differ."""
        t = self._board_rows(sweep, metric, runs, info, higher, min_effect=min_effect,
                             states=states, correction=correction, family_error=family_error,
                             decide=decide)
        t = t.with_columns(rank=rank(t, higher))
        cols = [*HEAD, *varying(t), *STAT_COLUMNS, *TAIL]
        return t.select(cols).sort(pl.col("rank"), "variant", "lr", nulls_last=True)

    def _board_rows(self, sweep: str, metric: str, runs: pl.DataFrame, info: pl.DataFrame,
                    higher: bool, *, min_effect: float, states: Sequence[str],
                    correction: str, family_error: float, decide: DecideRule | None
                    ) -> pl.DataFrame:
        """The leaderboard's rows in declared order with every column compare.py gives them,
        each with its baseline's condition at its LR, read by ``decide`` where it reads
        ``metric`` (sequential.onto_board): what ``_board`` ranks and db.findings' same-LR
        answer reads, so a verdict and its interval are the same on both."""
        base = self.baseline(sweep)
        t = compare(runs, info, metric, base, states=states, min_effect=min_effect,
                    higher=higher, correction=correction, family_error=family_error)
        # each row's baseline at its LR: tuned, or "vs an untuned baseline (x % worse ...)"
        conditions = baseline_conditions(t, _finished(runs, metric, states), higher, base)
        t = t.join(conditions.select("group_key", CONDITION), on="group_key", how="left",
                   maintain_order="left")
        if decide is not None and decide.metric == metric:
            t = onto_board(t, self.decide_rows(sweep, decide), decide)
        return t

    def best_vs_best(self, sweep: str, metric: str = METRIC, *, lr: float | None = None,
                     min_effect: float = MIN_EFFECT, states: Sequence[str] = RESULT_STATES,
                     ascending: bool | None = None) -> pl.DataFrame:
        """Each variant at its best LR vs the baseline at its own best LR, each LR chosen on
        other seeds than the one it judges (leave-one-seed-out), or both at a declared ``lr``
        (results_db/analysis/bestlr.py): variant, label, n_lrs, best_lr, baseline_best_lr,
        selection, picks, baseline_picks, n, base_n, delta, delta_pct, ci_low_pct,
        ci_high_pct, ci_method, verdict, note. A side run at one LR has no best LR and a
        side with one seed no held-out pick: said in ``verdict`` and ``note``, no delta."""
        higher = higher_is_better(metric) if ascending is None else not ascending
        runs, info = self._read(sweep, [metric])
        base = self.baseline(sweep)
        board = compare(runs, info, metric, base, states=states, min_effect=min_effect,
                        higher=higher)
        declared_check(lr, board["lr"].drop_nulls().unique().to_list())
        return best_vs_best(board, _finished(runs, metric, states), higher, base, lr=lr,
                            min_effect=min_effect)

    def findings(self, sweep: str, metric: str = METRIC, *, min_effect: float = MIN_EFFECT,
                 correction: str = CORRECTION, family_error: float = FAMILY_ERROR,
                 states: Sequence[str] = RESULT_STATES,
                 decide: DecideRule | None = None) -> Findings:
        """The study's answers, what every surface says first (results_db/analysis/
        findings.py): at the baseline's tuned LR each variant better / worse / within noise
        (Table 1's frame, judged by ``correction`` over those rows); each variant at its
        tuned LR vs the tuned baseline (LRs picked on held-out seeds); the largest stable LR
        of each (Table 2's frame); the trend across a size / token axis. Each finding with
        its condition (metric, LR, seeds, step), estimate, verdict and rule. ``decide``: the
        sweep's ``decide:`` rule; on its metric the same-LR findings are the leaderboard's
        anytime-valid rows (db.leaderboard(decide=...): interval, verdict and the rule's
        family over all its rows; ``correction`` and ``family_error`` unused there), since a
        fixed-n reading of seeds added after looking does not hold its error rate."""
        higher = higher_is_better(metric)
        runs, info = self._read(sweep, [metric])
        base = self.baseline(sweep)
        board = compare(runs, info, metric, base, states=states, min_effect=min_effect,
                        higher=higher)
        values = _finished(runs, metric, states)
        tuned = tuned_lrs(board, values, higher, base)
        keep = at_tuned(board, values, tuned, base) if tuned else []
        rule = decide if decide is not None and decide.metric == metric else None
        if rule is None:
            at = compare(runs.filter(pl.col("group_key").is_in(keep)), info, metric, base,
                         states=states, min_effect=min_effect, higher=higher,
                         correction=correction, family_error=family_error)
        else:  # the rows as the leaderboard reads them; the family is the rule's, every row
            read = self._board_rows(sweep, metric, runs, info, higher, min_effect=min_effect,
                                    states=states, correction=CORRECTION,
                                    family_error=FAMILY_ERROR, decide=rule)
            at = read.filter(pl.col("group_key").is_in(keep))
        bvb = best_vs_best(board, values, higher, base, min_effect=min_effect)
        st = self.stability(sweep) if board["lr"].n_unique() > 1 else None
        sc = self.scaling(sweep, metric, states=states, min_effect=min_effect) \
            if scale_axes(board, base) else None
        return findings(sweep, metric, base, board, at, tuned, bvb, st, sc, STABILITY_METRIC,
                        decide=rule)

    def decide_rows(self, sweep: str, rule: DecideRule, method: str = METHOD
                    ) -> pl.DataFrame:
        """The rows of an adaptive (``decide:``) sweep read anytime-validly, one per variant
        row with a baseline (results_db/analysis/sequential.py): pairs in their recorded
        order, a row a recorded look decided under the current rule kept as decided."""
        # every registered run: a failed or open one is an incomplete pair, not no seed
        runs, info = self._read(sweep, [rule.metric], states=list(RunStatus))
        values = runs.select("run_id", "group_key", "seed", "status",
                             value=pl.col(rule.metric))
        version = 1 + len(self.rule_changes(sweep))
        return read_rows(values, info, self.baseline(sweep), rule, method,
                         order=self.pair_order(sweep), settled=self.settled(sweep, version))

    def record_decide_look(self, sweep: str, rule: DecideRule) -> int:
        """Record this look of an adaptive sweep (results_db/write/decide_records.py): the
        pairs read for the first time and every row's reading; returns the look's number."""
        rows = self.decide_rows(sweep, rule)
        pairs = [(str(k), int(s)) for k, seeds in rows.select("group_key", "read_seeds")
                 .iter_rows() for s in seeds] if rows.height else []
        readings = rows.select("group_key", "n", "incomplete", "mean", "low", "high",
                               "verdict").to_dicts() if rows.height else []
        return self.record_look(sweep, pairs, readings, 1 + len(self.rule_changes(sweep)))

    def decide_sentence(self, sweep: str, rule: DecideRule, method: str = METHOD) -> str:
        """The adaptive sweep's verdicts in one sentence with their rule and the rule changes
        behind them."""
        return sentence(self.decide_rows(sweep, rule, method), rule, sweep,
                        self.baseline(sweep), self.rule_changes(sweep))

    def decide_spent(self, sweep: str) -> Spent:
        """Runs, wall hours and GPU-hours the sweep has used (a decide: budget)."""
        n = self.runs(sweep=sweep, with_config=False, columns=["id"]).height
        return spent(sweep_attempts(self.reader, sweep), n, datetime.now(UTC))

    def ablation_table(self, sweep: str, metrics: Sequence[str] = ABLATION_METRICS, *,
                       min_effect: float = MIN_EFFECT,
                       states: Sequence[str] = RESULT_STATES) -> pl.DataFrame:
        """One row per seed group (baseline first, then declared order): variant, lr, all
        dimension columns, n, n_diverged, is_baseline, and per metric ``<m>:<column>`` for
        n, mean, std, delta, delta_pct, ci_low/high(_pct), ci_method, verdict, seeds_needed,
        plus ``<m>:text`` ("12.3 ± 0.41"). With an LR axis, the ladder's max_stable_lr.
        One read of the runs serves every metric and the stability summary."""

        if not metrics:
            raise ValueError("ablation_table: metrics is empty; give at least one name")
        runs, info = self._read(sweep, [*metrics, STABILITY_METRIC, *EXTRA_METRICS],
                                stability=True)
        base = self.baseline(sweep)
        tables = [compare(runs, info, m, base, states=states, min_effect=min_effect,
                          higher=higher_is_better(m)) for m in metrics]
        ladders = _ladders(analyse(runs, STABILITY_METRIC, STABILITY_TOL))
        return ablation(tables, list(metrics), ladders)

    def effects(self, sweep: str, metric: str = METRIC, *, min_effect: float = MIN_EFFECT,
                states: Sequence[str] = RESULT_STATES) -> pl.DataFrame:
        """Main effects: per (learning rate, dimension, value), the estimated marginal mean
        of the change vs the baseline from an OLS fit over the runs, with a 95 % CI
        (results_db/analysis/effects.py): dimension, value, lr, n_variants, n_runs,
        mean_delta_pct, ci_low_pct, ci_high_pct, verdict, df, context."""
        higher = higher_is_better(metric)
        runs, info = self._read(sweep, [metric])
        table = compare(runs, info, metric, self.baseline(sweep), states=states,
                        min_effect=min_effect, higher=higher)
        return main_effects(table, runs, metric, higher, min_effect, states)

    def effects_summary(self, sweep: str, metric: str = METRIC, *,
                        min_effect: float = MIN_EFFECT) -> str:
        """The main effects in words (results_db/analysis/summary.py effects_sentence)."""
        return effects_sentence(self.effects(sweep, metric, min_effect=min_effect), sweep,
                                metric)

    def factorial(self, sweep: str, metric: str = METRIC, *, min_effect: float = MIN_EFFECT,
                  family_error: float = FAMILY_ERROR, states: Sequence[str] = RESULT_STATES,
                  designs: Sequence[Design] = DESIGNS,
                  decide: DecideRule | None = None) -> Factorial:
        """The sweep's 2x2 of two binary factors (results_db/analysis/factorial.py; today
        sparse x gated: NSA with equal branch weights, the G1 gate): each cell's leaderboard
        row (delta %, CI, verdict), the two main effects and the interaction per paired seed
        with Bonferroni CIs over the 3 and verdicts, and ``.sentence()``; ``.reason`` when the
        sweep has no such 2x2. ``designs``: the 2x2s to look for, the first found is used.
        ``decide``: the sweep's ``decide:`` rule; on its metric the cells are the leaderboard's
        anytime-valid rows and the contrasts are read by the rule too (its confidence
        sequence, margin and error rate; ``min_effect`` and ``family_error`` unused)."""
        higher = higher_is_better(metric)
        runs, info = self._read(sweep, [metric])
        rule = decide if decide is not None and decide.metric == metric else None
        board = self._board(sweep, metric, runs, info, higher, min_effect=min_effect,
                            states=states, correction=CORRECTION, family_error=FAMILY_ERROR,
                            decide=rule)
        values = runs.select("run_id", "group_key", "seed", "status", value=pl.col(metric))
        return factorial(board, values, info, self.baseline(sweep), sweep, metric, higher,
                         designs=designs, min_effect=min_effect, family_error=family_error,
                         states=states, decide=rule,
                         order=self.pair_order(sweep) if rule is not None else None)

    def scaling(self, sweep: str, metric: str = METRIC, *,
                states: Sequence[str] = RESULT_STATES,
                min_effect: float = MIN_EFFECT) -> Scaling:
        """Does each variant's delta hold with scale (results_db/analysis/scaling.py)?
        ``.points``: per (group, evaluation step) the paired delta vs the baseline with a 95 %
        CI over seeds, at its tokens and training FLOPs, and the iso-FLOP delta; ``.trends``:
        the slope of delta % per decade of tokens (per group) and of parameters / FLOPs (per
        variant, across the sizes) with CIs, the iso-FLOP delta, and one sentence each; "flat"
        and "within noise" only inside +-100 x ``min_effect`` (pp per decade, %)."""

        runs = runs_wide(self.reader, sweep, [], keys=COMPARE_KEYS)
        series = self.metrics(runs["run_id"].to_list(), names=[metric]) if runs.height else \
            pl.DataFrame(schema={"run_id": pl.Int64, "step": pl.Int64, "value": pl.Float64})
        return scaling(series.select("run_id", "step", "value"), runs,
                       group_info(self.reader, sweep), self._costs(sweep), self.baseline(sweep),
                       metric, higher=higher_is_better(metric), states=states,
                       min_effect=min_effect)

    def _costs(self, sweep: str) -> pl.DataFrame:
        """Per seed group: tokens per step, parameters (contract/params.py) and training FLOPs
        per token (contract/flops.py) from its first run's config; null where that config is
        not a valid RunSpec."""

        from pydantic import ValidationError


        runs = self.runs(sweep, columns=["id", "group_key"]).unique("group_key", keep="first")
        rows: list[tuple[Any, int | None, int | None, float | None]] = []
        for key, config in runs.select("group_key", "config").iter_rows():
            try:
                spec = RunSpec.model_validate(json.loads(config))
            except (ValidationError, ValueError, TypeError):
                rows.append((key, None, None, None))
                continue
            fpt = float(flops_per_token(spec.model, spec.train.seq_len).total)
            rows.append((key, spec.tokens_per_step, count(spec.model)[0], fpt))
        return pl.DataFrame(rows, schema={"group_key": pl.String, "tokens_per_step": pl.Int64,
                                          "params": pl.Int64, "fpt": pl.Float64}, orient="row")

    def stability(self, sweep: str, metric: str = STABILITY_METRIC,
                  tol: float = STABILITY_TOL) -> Stability | None:
        """LR stability (results_db/analysis/stability.py), None when no variant of the sweep
        ran at more than one learning rate:

        - ``.curve`` per (ladder, lr): label, variant, lr, n, mean, std, CI, rel_to_best,
          spikes, divergence, max activation, degraded/stable, and the change vs the
          baseline at the same LR (delta_pct, ci_low_pct, ci_high_pct, ci_method, verdict:
          the leaderboard's numbers on ``metric``);
        - ``.summary`` per ladder (most stable first): label, variant, best_lr,
          max_stable_lr, ..., and the per-seed rule's n_seeds, seeds_agree, seed_msl_min/max,
          seed_msls;
        - ``.per_seed`` per (ladder, seed): best_lr, max_stable_lr;
        - ``.rule`` and ``.sentence`` (the outcome in words, with seed agreement and CIs)."""

        runs = runs_wide(self.reader, sweep, [metric, *EXTRA_METRICS])
        info = group_info(self.reader, sweep)
        base = self.baseline(sweep)
        table = compare(runs, info, metric, base, higher=False)
        st = analyse(runs, metric, tol, info=info, table=table, baseline=base)
        return st if _ladders(st) is not None else None

    def _stability(self, sweep: str, metric: str, tol: float) -> Stability:
        runs = runs_wide(self.reader, sweep, [metric, *EXTRA_METRICS], keys=LADDER_KEYS)
        return analyse(runs, metric, tol)

    def max_stable_lr(self, sweep: str, tolerance: float = STABILITY_TOL,
                      metric: str = STABILITY_METRIC) -> pl.DataFrame:
        """Per LR ladder (also with a single LR): the stability summary -- lr_group_key,
        variant, best_lr, best_value, max_stable_lr, n_lrs, lrs, min_diverged_lr,
        value_at_max, top_lr, rel_at_top_lr, label (the variant), n_seeds, seeds_agree,
        seed_msl_min, seed_msl_max, seed_msls (db.stability has the labels by dimension,
        the change vs the baseline and the sentence)."""
        return self._stability(sweep, metric, tolerance).summary


def _ladders(st: Stability) -> pl.DataFrame | None:
    """The stability summary when some variant ran at more than one learning rate."""
    return (st.summary if st.summary.height and cast(int, st.summary["n_lrs"].max()) > 1
            else None)


def _finished(runs: pl.DataFrame, metric: str, states: Sequence[str]) -> pl.DataFrame:
    """group_key, seed, status, value of the runs in ``states`` or diverged: what the LR
    rules read (a diverged run is a divergence at its LR, not a missing run)."""
    done = [*states, RunStatus.DIVERGED.value]
    return runs.filter(pl.col("status").is_in(done)).select(
        "group_key", "seed", "status", value=pl.col(metric))
