"""Cached reads of the results database: the only module of the dashboard that talks to it.

Everything goes through results_db's API (no SQL here): the DB is opened read-only
(``results_db.open(url, readonly=True)``), every statistic (baseline, deltas, CIs, verdicts,
effects, stability) comes from results_db's AnalysisMixin, live-run state from its LiveMixin.
Each read is an ``st.cache_data`` function keyed by the DB URL and its arguments, with a short
TTL so a live sweep shows up within seconds while a re-render costs no DB round trip.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import streamlit as st

import results_db
from contract.analysis_defaults import (
    CORRECTION,
    FAMILY_ERROR,
    METRIC,
    STABILITY_METRIC,
    STABILITY_TOL,
)
from dashboard import ablation, explore
from results_db.analysis.decide_rule import DecideRule
from results_db.analysis.factorial import Factorial
from results_db.analysis.findings import Findings

LIVE_TTL_S = 3  # status of live runs: refreshed by the pages' fragments
TTL_S = 15  # results (summaries, metrics): change only when a run reports


def db_url() -> str:
    """The DB the app shows: $GATESWEEP_DB (set by `orchestrator dashboard`), else the default."""
    return results_db.default_url()


@st.cache_resource(show_spinner=False)
def open_db(url: str) -> results_db.ResultsDB:
    """One read-only ResultsDB per URL for the whole server process (the rerun button writes
    through orchestrator.run.driver.rerun, which opens its own)."""
    return results_db.open(url, readonly=True)


def schema_note(url: str) -> str | None:
    """The warning for a DB a newer gatesweep migrated (read anyway), else None."""
    note: str | None = open_db(url).schema_note
    return note


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def sweep_status(url: str) -> pl.DataFrame:
    """Per sweep: counts by state (the DB's own aggregation)."""
    return open_db(url).sweep_status()


def status_of(url: str, sweep: str | None) -> pl.DataFrame:
    """``sweep_status`` rows of ``sweep`` (every sweep when None). A sweep the 3-s cached
    counts do not know yet (a page opened from the link `submit` prints, right after it) is
    read again: its pending runs said "no run active" for up to 3 s and the page kept the
    slow, idle refresh."""
    frame = sweep_status(url)
    if sweep is None or "sweep" not in frame.columns:
        return frame
    mine = frame.filter(pl.col("sweep") == sweep)
    if mine.is_empty():
        sweep_status.clear()
        mine = sweep_status(url).filter(pl.col("sweep") == sweep)
    return mine


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def sweeps(url: str) -> pl.DataFrame:
    return open_db(url).sweeps()


# The runs columns the pages use: db.runs(with_config=False, columns=...) reads no config JSON
# and no timestamps (10k runs: 0.055 s vs 0.145 s for every column, docs/benchmarks.md).
RUN_COLUMNS: tuple[str, ...] = ("id", "name", "variant", "seed", "status", *results_db.DIMENSIONS,
                                "group_key", "params_total", "params_gates")


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def runs(url: str, sweep: str | None) -> pl.DataFrame:
    """The sweep's runs with their dimension columns (no config), in id order."""
    frame = open_db(url).runs(sweep=sweep, with_config=False, columns=RUN_COLUMNS)
    # an empty result has untyped (Null) columns: keep the boolean filter column boolean
    return frame.with_columns(pl.col("gate_input_dependent").cast(pl.Boolean),
                              pl.col("lr").cast(pl.Float64))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def baseline(url: str, sweep: str) -> str | None:
    """THE baseline of the sweep (results_db.analysis.baseline.pick_baseline)."""
    return open_db(url).baseline(sweep)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def variants(url: str, sweep: str) -> list[str]:
    """The sweep's variants, baseline first, then in declared order (first run id): the
    order every chart's palette is built from (dashboard/palette.py)."""
    frame = runs(url, sweep)
    if frame.is_empty():
        return []
    order = frame.group_by("variant").agg(pl.col("id").min()).sort("id")["variant"].to_list()
    base = baseline(url, sweep)
    return ([base] if base is not None and base in order else []) + [v for v in order if v != base]


def summary_names(url: str, sweep: str | None) -> list[str]:
    """The distinct summary names of the sweep's runs, sorted."""
    return _summary_names(url, sweep, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _summary_names(url: str, sweep: str | None, version: tuple[int, ...]) -> list[str]:
    return open_db(url).summary_names(sweep)


def summaries(url: str, sweep: str | None, names: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Long frame (run_id, name, value) of the sweep's summaries (only ``names`` when given)."""
    return _summaries(url, sweep, names, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _summaries(url: str, sweep: str | None, names: tuple[str, ...] | None,
               version: tuple[int, ...]) -> pl.DataFrame:
    frame = open_db(url).summaries(sweep=sweep, names=None if names is None else list(names))
    if frame.is_empty():
        return pl.DataFrame(schema={"run_id": pl.Int64, "name": pl.String, "value": pl.Float64})
    return frame.select("run_id", "name", "value")


@st.cache_data(ttl=TTL_S, show_spinner=False)
def run_summaries(url: str, run_id: int) -> pl.DataFrame:
    frame = open_db(url).summaries(run_ids=[run_id])
    return frame.select("name", "value") if frame.height else frame


def sweep_state(url: str, sweep: str | None) -> tuple[int, ...]:
    """The sweep's run counts by state (from the 3-s ``sweep_status`` read): the version every
    results read below is cached under, so a run that finishes shows up on the next page run
    instead of after a TTL, and the pages' watcher (views/common.watch) reruns on a change."""
    frame = status_of(url, sweep)
    cols = [c for c in frame.columns if c not in ("sweep", "total", "done")]
    return tuple(int(frame[c].sum() or 0) for c in sorted(cols))


def leaderboard(url: str, sweep: str, metric: str, ascending: bool,
                states: tuple[str, ...], correction: str = CORRECTION,
                family_error: float = FAMILY_ERROR,
                decide: DecideRule | None = None) -> pl.DataFrame:
    """db.leaderboard: per (variant, lr) group n, mean, std, Δ with its CI (95 % per row, or
    corrected over the rows: results_db/analysis/multiplicity.py), verdict; an adaptive
    sweep's rows read by its ``decide`` rule (anytime-valid, Holm)."""
    return _leaderboard(url, sweep, metric, ascending, states, correction, family_error,
                        decide, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _leaderboard(url: str, sweep: str, metric: str, ascending: bool,
                 states: tuple[str, ...], correction: str, family_error: float,
                 decide: DecideRule | None, version: tuple[int, ...]) -> pl.DataFrame:
    return open_db(url).leaderboard(sweep, metric, states=states, ascending=ascending,
                                    correction=correction, family_error=family_error,
                                    decide=decide)


def findings(url: str, sweep: str, metric: str = METRIC, correction: str = CORRECTION,
             family_error: float = FAMILY_ERROR, decide: DecideRule | None = None) -> Findings:
    """db.findings: the study's answers, each with its condition and rule (what the CLI's
    ``findings``, the leaderboard's first lines and the report's first page say); an adaptive
    sweep's read by its ``decide`` rule (its leaderboard's anytime-valid rows); cached per
    sweep state."""
    return _findings(url, sweep, metric, correction, family_error, decide,
                     sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _findings(url: str, sweep: str, metric: str, correction: str, family_error: float,
              decide: DecideRule | None, version: tuple[int, ...]) -> Findings:
    return open_db(url).findings(sweep, metric, correction=correction,
                                 family_error=family_error, decide=decide)


def decide_sentence(url: str, sweep: str, decide: DecideRule) -> str:
    """An adaptive sweep's rows in one sentence by its own rule (anytime-valid, Holm), as the
    CLI's leaderboard says it."""
    return open_db(url).decide_sentence(sweep, decide)


def best_vs_best(url: str, sweep: str, metric: str, ascending: bool,
                 states: tuple[str, ...]) -> pl.DataFrame:
    """db.best_vs_best: each variant at its best LR vs the baseline at its own, each LR
    picked on other seeds than the one it judges; no best LR / one seed said in words."""
    return _best_vs_best(url, sweep, metric, ascending, states, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _best_vs_best(url: str, sweep: str, metric: str, ascending: bool,
                  states: tuple[str, ...], version: tuple[int, ...]) -> pl.DataFrame:
    return open_db(url).best_vs_best(sweep, metric, states=states, ascending=ascending)


def code_mix(url: str, sweep: str) -> str | None:
    """results_db's sentence saying that the sweep's compared runs came from different code or
    packages (db.code_mix), None when they did not; cached per sweep state."""
    return _code_mix(url, sweep, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _code_mix(url: str, sweep: str, version: tuple[int, ...]) -> str | None:
    return open_db(url).code_mix(sweep).sentence


def effects(url: str, sweep: str, metric: str) -> pl.DataFrame:
    return _effects(url, sweep, metric, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _effects(url: str, sweep: str, metric: str, version: tuple[int, ...]) -> pl.DataFrame:
    return open_db(url).effects(sweep, metric)


def factorial(url: str, sweep: str, decide: DecideRule | None = None) -> Factorial:
    """db.factorial: the sweep's 2x2 (``.found`` False when it has none); an adaptive sweep's
    read by its ``decide`` rule (anytime-valid cells and contrasts)."""
    return _factorial(url, sweep, decide, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _factorial(url: str, sweep: str, decide: DecideRule | None,
               version: tuple[int, ...]) -> Factorial:
    return open_db(url).factorial(sweep, decide=decide)


def stability(url: str, sweep: str, metric: str = STABILITY_METRIC,
              tol: float = STABILITY_TOL) -> Any:
    """db.stability: None for a sweep without an LR axis."""
    return _stability(url, sweep, metric, tol, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _stability(url: str, sweep: str, metric: str, tol: float, version: tuple[int, ...]) -> Any:
    return open_db(url).stability(sweep, metric, tol)


def max_stable_lr(url: str, sweep: str) -> pl.DataFrame:
    """Per variant (also with one LR): best LR, max stable LR (db.max_stable_lr)."""
    return _max_stable_lr(url, sweep, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _max_stable_lr(url: str, sweep: str, version: tuple[int, ...]) -> pl.DataFrame:
    return open_db(url).max_stable_lr(sweep)


def ablation_frame(url: str, sweep: str, metrics: tuple[str, ...]) -> pl.DataFrame:
    """db.ablation_table: one row per seed group, per metric n/mean/std/Δ/CI/verdict."""
    return _ablation_frame(url, sweep, metrics, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _ablation_frame(url: str, sweep: str, metrics: tuple[str, ...],
                    version: tuple[int, ...]) -> pl.DataFrame:
    return open_db(url).ablation_table(sweep, metrics)


def ablation_table(url: str, sweep: str, kind: ablation.Kind, with_paper: bool) -> Any:
    """One paper-layout table of the sweep (dashboard/ablation.py), cached per sweep state."""
    return _ablation_table(url, sweep, kind, with_paper, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _ablation_table(url: str, sweep: str, kind: ablation.Kind, with_paper: bool,
                    version: tuple[int, ...]) -> Any:
    names = ablation.metric_names(kind, summary_names(url, sweep))
    frame = ablation_frame(url, sweep, tuple(names))
    msl = max_stable_lr(url, sweep) if kind == "stability" else None
    return ablation.build(kind, frame, names, with_paper=with_paper, max_stable_lr=msl)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def metrics(url: str, run_ids: tuple[int, ...], names: tuple[str, ...],
            max_points: int) -> pl.DataFrame:
    """Time series (run_id, name, step, value), downsampled in the DB to ``max_points`` each
    (from the metric rollup where its blocks fit: results_db/read/downsample.py)."""
    if not run_ids or not names:
        return pl.DataFrame(schema={"run_id": pl.Int64, "name": pl.String, "step": pl.Int64,
                                    "value": pl.Float64})
    return open_db(url).curves(list(run_ids), list(names), max_points)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def tokens_per_step(url: str, sweep: str) -> dict[int, int]:
    """{run id: tokens per optimizer step}: the curves' token axis."""
    return open_db(url).tokens_per_step(sweep)


def live_runs(url: str, sweep: str | None) -> pl.DataFrame:
    """db.live_runs: per live run its step, last loss, tokens/s, ETA and heartbeat age.
    Cached under the sweeps' run counts as well as for LIVE_TTL_S: read on its own 3-s clock
    it could be older than the counts beside it, and the Overview went on listing a finished
    run as "running 360/400" under a sweep table that said 0 running."""
    return _live_runs(url, sweep, status_version(url, sweep))


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def _live_runs(url: str, sweep: str | None, version: tuple[tuple[Any, ...], ...]
               ) -> pl.DataFrame:
    return open_db(url).live_runs(sweep)


def status_version(url: str, sweep: str | None) -> tuple[tuple[Any, ...], ...]:
    """The run counts by state of ``sweep`` (of every sweep, each on its own, when None):
    one run leaving ``running`` in one sweep while another starts elsewhere still changes
    it, which the totals of ``sweep_state`` would not."""
    return tuple(status_of(url, sweep).rows())


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def run_detail(url: str, run_id: int) -> dict[str, Any] | None:
    """One run: its row (config included), attempts and artifacts; None when unknown."""
    db = open_db(url)
    row = db.run(run_id)
    if row is None:
        return None
    return {"run": row, "attempts": db.attempts(run_id), "artifacts": db.artifacts(run_id)}


def config_frame(url: str, sweep: str) -> pl.DataFrame:
    """(id, every flattened config key whose value is not the same in all the sweep's runs):
    the Explore page's keys (dashboard/explore.config_frame), cached per sweep state."""
    return _config_frame(url, sweep, sweep_state(url, sweep))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def _config_frame(url: str, sweep: str, version: tuple[int, ...]) -> pl.DataFrame:
    frame = open_db(url).runs(sweep=sweep, with_config=True, columns=("id",))
    return explore.config_frame(frame["id"].to_list(), frame["config"].to_list())


@st.cache_data(ttl=TTL_S, show_spinner=False)
def run_config(url: str, run_id: int) -> dict[str, Any] | None:
    row = open_db(url).run(run_id)
    return None if row is None else dict(row.config)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def run_provenance(url: str, run_id: int) -> pl.DataFrame:
    """What produced each of the run's attempts (db.provenance): code version, packages,
    device, CPU, DeepSpeed config; empty for attempts from before it was recorded."""
    return open_db(url).provenance(run_ids=[run_id])


def clear() -> None:
    """Forget every cached read (after the rerun button changed the DB)."""
    st.cache_data.clear()
