"""Cached reads of the results database: the only module of the dashboard that talks to it.

Everything goes through results_db's Polars API (never Ray, never raw SQL writes). Each query is
an ``st.cache_data`` function keyed by the DB URL and its arguments, with a short TTL so a live
sweep shows up within seconds while a page re-render costs no DB round trip.
"""

from __future__ import annotations

import os
from typing import Any

import polars as pl
import streamlit as st

from dashboard import ablation, tables

DEFAULT_URL = "sqlite:///results.db"
LIVE_TTL_S = 3  # status of live runs: refreshed by the overview fragment
TTL_S = 15  # results (summaries, metrics): change only when a run reports


def db_url() -> str:
    """The DB the app shows: $GATESWEEP_DB (set by `orchestrator dashboard`), else the default."""
    return os.environ.get("GATESWEEP_DB") or DEFAULT_URL


@st.cache_resource(show_spinner=False)
def open_db(url: str) -> Any:
    """One ResultsDB (engine + pool) per URL for the whole server process."""
    import results_db  # lazy: keeps `import dashboard.tables` free of SQLAlchemy for tests

    return results_db.open(url)


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def sweep_status(url: str) -> pl.DataFrame:
    """Per sweep: counts by state (the DB's own aggregation)."""
    return open_db(url).sweep_status()


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def sweeps(url: str) -> pl.DataFrame:
    return open_db(url).sweeps()


# The runs columns the pages use: db.runs(with_config=False, columns=...) reads no config JSON
# and no timestamps (10k runs: 0.055 s vs 0.145 s for every column, docs/benchmarks.md).
RUN_COLUMNS: tuple[str, ...] = (
    "id", "name", "variant", "seed", "status", "gate_position", "gate_granularity",
    "gate_sharing", "gate_combine", "gate_activation", "gate_input_dependent", "nonlinearity",
    "lr", "n_head", "n_kv_head", "moe_experts", "norm_style", "switch_head", "clip_residual",
    "group_key", "params_total", "params_gates")


def _quote(text: str) -> str:
    """A SQL string literal (db.query takes no bind parameters; it is read-only anyway)."""
    return "'" + text.replace("'", "''") + "'"


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def runs(url: str, sweep: str | None) -> pl.DataFrame:
    """The sweep's runs with their dimension columns (no config), in id order."""
    frame = open_db(url).runs(sweep=sweep, with_config=False, columns=RUN_COLUMNS)
    # an empty result has untyped (Null) columns: keep the boolean filter column boolean
    return frame.with_columns(pl.col("gate_input_dependent").cast(pl.Boolean))


@st.cache_data(ttl=TTL_S, show_spinner=False)
def summary_names(url: str, sweep: str | None) -> list[str]:
    """The distinct summary names of the sweep's runs, sorted."""
    where = f"WHERE s.name = {_quote(sweep)}" if sweep is not None else ""
    frame = open_db(url).query(
        "SELECT DISTINCT m.name AS name FROM summaries m JOIN runs r ON r.id = m.run_id "
        f"JOIN sweeps s ON s.id = r.sweep_id {where}")
    return sorted(frame["name"].to_list()) if frame.height else []


@st.cache_data(ttl=TTL_S, show_spinner=False)
def summaries(url: str, sweep: str | None, names: tuple[str, ...] | None = None) -> pl.DataFrame:
    """Long frame (run_id, name, value) of the sweep's summaries (only ``names`` when given:
    a page needs a handful of the ~20 names, and reading fewer rows is most of the cost)."""
    frame = open_db(url).summaries(sweep=sweep, names=None if names is None else list(names))
    if frame.is_empty():
        return pl.DataFrame(schema={"run_id": pl.Int64, "name": pl.String, "value": pl.Float64})
    return frame.select("run_id", "name", "value")


@st.cache_data(ttl=TTL_S, show_spinner=False)
def run_summaries(url: str, run_id: int) -> pl.DataFrame:
    frame = open_db(url).summaries(run_ids=[run_id])
    return frame.select("name", "value") if frame.height else frame


@st.cache_data(ttl=TTL_S, show_spinner=False)
def leaderboard(url: str, sweep: str, metric: str, ascending: bool,
                states: tuple[str, ...]) -> pl.DataFrame:
    """tables.leaderboard over the sweep, cached: a filter change re-renders without rework."""
    return tables.leaderboard(runs(url, sweep), summaries(url, sweep, (metric,)), metric,
                              ascending, states)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def ablation_table(url: str, sweep: str, kind: str, with_paper: bool) -> ablation.AblationTable:
    """One paper-layout table of the sweep (dashboard/ablation.py), cached."""
    names = ablation.metric_names(kind, summary_names(url, sweep))
    msl = max_stable_lr(url, sweep)[0] if kind == "stability" else None
    return ablation.build(kind, runs(url, sweep), summaries(url, sweep, tuple(names)),
                          with_paper=with_paper, max_stable_lr=msl)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def metrics(url: str, run_ids: tuple[int, ...], names: tuple[str, ...],
            max_points: int) -> pl.DataFrame:
    """Time series (run_id, name, step, value), downsampled in the DB to ``max_points`` each."""
    if not run_ids:
        return pl.DataFrame(schema={"run_id": pl.Int64, "name": pl.String, "step": pl.Int64,
                                    "value": pl.Float64})
    return open_db(url).metrics(run_ids=list(run_ids), names=list(names), max_points=max_points)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def max_stable_lr(url: str, sweep: str) -> tuple[pl.DataFrame | None, str | None]:
    """(db.max_stable_lr(sweep), None), or (None, why not): the stability table still renders
    (without that column) when the derivation is unavailable or fails."""
    db = open_db(url)
    if not hasattr(db, "max_stable_lr"):
        return None, "this results_db has no max_stable_lr"
    try:
        return db.max_stable_lr(sweep), None
    except Exception as exc:  # noqa: BLE001 - shown on the page; the rest of the table stands
        return None, f"{type(exc).__name__}: {exc}"


@st.cache_data(ttl=LIVE_TTL_S, show_spinner=False)
def run_detail(url: str, run_id: int) -> dict[str, Any] | None:
    """One run: its row (config included), attempts and artifacts; None when unknown."""
    db = open_db(url)
    row = db.run(run_id)
    if row is None:
        return None
    return {"run": row, "attempts": db.attempts(run_id), "artifacts": db.artifacts(run_id)}


@st.cache_data(ttl=TTL_S, show_spinner=False)
def run_config(url: str, run_id: int) -> dict[str, Any] | None:
    row = open_db(url).run(run_id)
    return None if row is None else dict(row.config)


def clear() -> None:
    """Forget every cached read (after the rerun button changed the DB)."""
    st.cache_data.clear()
