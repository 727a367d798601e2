"""The report's sections, read from results_db (which computes every statistic) and drawn with
the dashboard's chart specs: the answers first (answers.py), then the details -- every
(variant, LR) row, the ablation tables beside the paper's figures, LR stability and scaling.
An adaptive (``decide:``) sweep's answers, rows and 2x2 are read by its stored rule, as the
CLI and the dashboard read them. runs.py adds the per-run sections."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import polars as pl

from contract.analysis_defaults import METRIC  # the leaderboard's default metric
from dashboard import ablation, charts, palette
from dashboard.boardtable import DELTA_PCT, display_frame
from dashboard.factorialtable import factorial_text
from dashboard.report import answers, runs
from dashboard.report.model import Block, Report, Section, Table, chart
from dashboard.tables import row_labels
from results_db.analysis.columns import CONDITION
from results_db.analysis.compare import seed_deltas
from results_db.analysis.sequential import interval_words
from results_db.analysis.summary import board_rule
from results_db.schema.vocab import RESULT_STATES

if TYPE_CHECKING:
    from results_db import ResultsDB
    from results_db.analysis.decide_rule import DecideRule
    from results_db.analysis.scaling import Scaling
    from results_db.analysis.stability import Stability

BOARD_COLUMNS = ("rank", "variant", "lr", "n", "mean ± std", DELTA_PCT, "verdict",
                 CONDITION, "seeds for Δ")  # "lr" where the sweep has several


def variants(db: ResultsDB, sweep: str, baseline: str | None) -> list[str]:
    """The sweep's variants, baseline first, then in declared order: the palette's order (as
    the dashboard's data.variants)."""
    frame = db.runs(sweep, with_config=False, columns=["id", "variant"])
    order = frame.group_by("variant").agg(pl.col("id").min()).sort("id")["variant"].to_list()
    first = [baseline] if baseline is not None and baseline in order else []
    return first + [v for v in order if v != baseline]


def build(db: ResultsDB, sweep: str, metric: str = METRIC) -> Report:
    """Every section of ``sweep``'s report (the DB opened read-only is enough)."""
    info = db.sweeps().filter(pl.col("name") == sweep)
    status = db.sweep_status(sweep)
    counts = ", ".join(f"{int(status[s][0])} {s}" for s in status.columns
                       if s not in ("sweep", "total", "done") and status[s][0]) \
        if status.height else ""
    base = db.baseline(sweep)
    colors = palette.colors(variants(db, sweep, base), base)
    mix = db.code_mix(sweep)
    st, sc = db.stability(sweep), db.scaling(sweep, metric)  # read once, said twice
    rule = _rule(db, sweep, metric)  # an adaptive sweep: read by its own rule, as the CLI
    # the first page: the answers (db.findings, as the CLI and the dashboard say them); then
    # the details: per-LR rows, tables, curves, provenance
    sections = [answers.answers(db.findings(sweep, metric, decide=rule), sc),
                leaderboard(db, sweep, metric, colors, rule),
                ablation_tables(db, sweep, _rule(db, sweep, METRIC)),
                stability(st, colors), scaling(sc, metric, colors),
                runs.curves(db, sweep, colors), runs.config_diff(db, sweep, base),
                runs.provenance(db, sweep, mix)]
    return Report(
        sweep=sweep, description=str(info["description"][0] or "") if info.height else "",
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        db=db.url.render_as_string(hide_password=True),
        counts=f"{int(status['total'][0])} runs: {counts}" if counts else "no runs yet",
        flags=(mix.sentence,) if mix.mixed and mix.sentence else (),
        sections=tuple(s for s in sections if s is not None))


def _rule(db: ResultsDB, sweep: str, metric: str) -> DecideRule | None:
    """The sweep's stored ``decide:`` rule on ``metric`` (None: fixed-n), by the dashboard's
    one helper (views/decide.py stored_rule)."""
    _views()
    from dashboard.views.decide import stored_rule

    return stored_rule(db.sweeps(), sweep, metric)


def board_frame(board: pl.DataFrame) -> pl.DataFrame:
    """db.leaderboard as the strings the report shows: the dashboard's own frame
    (dashboard/boardtable.py), the report's columns of it."""
    shown = display_frame(board)
    return shown.select(c for c in BOARD_COLUMNS if c in shown.columns)


def leaderboard(db: ResultsDB, sweep: str, metric: str, colors: dict[str, str],
                rule: DecideRule | None = None) -> Section:
    """Every (variant, LR) row; an adaptive sweep's read by its ``rule`` (anytime-valid
    intervals), with its sentence (db.decide_sentence) first."""
    board = db.leaderboard(sweep, metric, decide=rule)
    if board.is_empty():
        return Section("leaderboard", f"Leaderboard ({metric})",
                       (f"No finished run has a {metric} value yet.",))
    board = board.with_columns(row_labels(board))
    runs_ = db.runs(sweep, status=list(RESULT_STATES), with_config=False,
                    columns=["id", "group_key", "seed"])
    vals = db.summaries(run_ids=runs_["id"].to_list(), names=[metric]).join(
        runs_.select(pl.col("id").alias("run_id"), "group_key", "seed"), on="run_id")
    seeds = seed_deltas(board, vals.select("group_key", "seed", "value")).join(
        board.select("group_key", "row"), on="group_key")
    dots = charts.delta_dots(board, metric, colors, seeds.select("row", "seed", "delta_pct"))
    # the interval a row's verdict was read from, named as the rule names it
    ci = "95 % CI" if rule is None else f"{interval_words(rule)} ({board_rule(board)})"
    said = () if rule is None else (db.decide_sentence(sweep, rule),)
    return Section("leaderboard", f"Every (variant, LR) row ({metric})", (
        *said,
        "Details: each row against the baseline at the same LR; where the baseline is untuned "
        "at that LR the row says so, and it counts toward no answer.",
        db.effects_summary(sweep, metric)), (
        chart("leaderboard-chart", f"Δ {metric} vs the baseline, {ci}; small dots: each "
                                   "seed; marker: the verdict", dots),
        Table("leaderboard-table", board_frame(board),
              "mean ± std over seeds; Δ vs the baseline at the same LR (paired by seed where "
              f"the seeds match, else Welch), {ci}; 'seeds needed' for a ±1 % effect at "
              "80 % power")))


def ablation_tables(db: ResultsDB, sweep: str, rule: DecideRule | None = None) -> Section:
    """Tables 1/3 (quality) and 4 (probes) in the paper's layout, the paper's figures beside
    ours (dashboard/ablation.py formats db.ablation_table); then the sweep's 2x2 when it has
    one (dashboard/factorialtable.py formats db.factorial; an adaptive sweep's read by its
    ``rule``)."""
    available = db.summary_names(sweep)
    blocks: list[Block] = []
    kinds: tuple[tuple[ablation.Kind, str], ...] = (("quality", "ablation-table"),
                                                      ("probes", "probes-table"))
    for kind, id_ in kinds:
        names = ablation.metric_names(kind, available)
        if not names or not set(names) & set(available):
            continue
        table = ablation.build(kind, db.ablation_table(sweep, names), names, with_paper=True)
        if not table.display.is_empty():
            blocks.append(Table(id_, table.display, ablation.KINDS[kind]))
    said = [ablation.SCALE_CAVEAT] if blocks else ["No finished runs to tabulate."]
    fac = factorial_text(db.factorial(sweep, decide=rule)) if blocks else None
    if fac is not None:
        said.append(f"{fac.title}. {fac.sentence}")
        blocks += [Table("factorial-cells", fac.grid, fac.grid_caption),
                   Table("factorial-effects", fac.effects, fac.effects_caption)]
    return Section("ablation", "Ablation tables beside the paper's figures", tuple(said),
                   tuple(blocks))


def _views() -> None:
    """Before importing a page module for its frames and charts: its data module caches with
    st.cache_data, which warns once per function when no Streamlit app runs (as here)."""
    from streamlit import logger

    logger.set_log_level("error")


def stability(st: Stability | None, colors: dict[str, str]) -> Section | None:
    """The LR-stability curve (the dashboard's vs_lr chart) with the max stable LR of each
    ladder; None for a sweep without an LR axis."""
    _views()
    from dashboard.views.stability import delta_frame, lr_states, summary_frame

    if st is None:
        return None
    curve = lr_states(st.curve.with_columns(pl.col("stable").fill_null(False)), st.summary)
    msl = st.summary.select("variant", "max_stable_lr").drop_nulls()
    blocks: list[Block] = [
        chart("stability-chart", "Final val/loss vs learning rate (95 % CI; filled: stable, "
                                 "hollow: unstable; dashed: max stable LR)",
              charts.vs_lr(curve, "mean", "final val/loss", colors, ci=True, msl=msl)),
        Table("stability-table", summary_frame(st.summary), st.rule)]
    deltas = delta_frame(st.curve)
    if deltas.height:
        blocks.append(Table("stability-deltas", deltas, "Change vs the baseline at each LR "
                                                        "(95 % CI)"))
    return Section("stability", "Learning-rate stability", (st.sentence,) if st.sentence else (),
                   tuple(blocks))


def scaling(sc: Scaling, metric: str, colors: dict[str, str]) -> Section | None:
    """The change vs the baseline against training tokens (views/scaling.py's chart) and every
    trend reading, folded (the table with each reading's LR and step is on the first page);
    None when no evaluation point pairs with the baseline's."""
    _views()
    from dashboard.views.scaling import delta_chart

    if sc.points.is_empty():
        return None
    blocks: list[Block] = [chart("scaling-chart", f"Δ {metric} vs training tokens (95 % CI "
                                                   "over seeds), one line per variant and LR",
                                  delta_chart(sc.points, "tokens", metric, colors))]
    if sc.sentences:
        blocks.append(Table("scaling-sentences", pl.DataFrame({"reading": sc.sentences}),
                            "every scaling reading in words", collapsed=True))
    return Section("scaling", "Scaling", (), tuple(blocks))
