"""`orchestrator findings SWEEP`: the study's answers first (db.findings), each question with
its frame, condition and rule, then one row per finding. The same words the leaderboard's
first lines, the dashboard's first screen and the report's first page print: results_db
words them (results_db/analysis/findings.py); this command only renders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contract.analysis_defaults import CORRECTION, FAMILY_ERROR, METRIC, MIN_EFFECT
from orchestrator.cli.app import DbOpt, app, check_metrics, open_sweep, out
from orchestrator.cli.frame_format import check_format, render
from orchestrator.cli.read import stored_rule
from orchestrator.cli.results import CorrectionOpt, EffectOpt, FamilyErrorOpt, FormatOpt, MetricOpt
from results_db.analysis.columns import ROW_COLUMNS

if TYPE_CHECKING:
    from results_db import ResultsDB
    from results_db.analysis.findings import Findings


def findings_lines(d: ResultsDB, sweep: str, f: Findings) -> str:
    """The answers in words, and the sentence on mixed code versions when there is one."""
    note = d.code_mix(sweep).sentence
    return "\n".join([*f.lines(), *([note] if note else [])])


@app.command()
def findings(sweep: str, db: DbOpt = None, metric: MetricOpt = METRIC,
             min_effect: EffectOpt = MIN_EFFECT, correction: CorrectionOpt = CORRECTION,
             family_error: FamilyErrorOpt = FAMILY_ERROR, format: FormatOpt = "table") -> None:
    """The study's answers, in order: at the baseline's tuned LR is each variant better,
    worse or within noise (same hyper-parameters); each variant at its tuned LR vs the tuned
    baseline (LRs picked on held-out seeds); the largest stable LR of each; the trend with
    scale. Each with its condition (metric, LR, seeds, step) and its rule."""
    import polars as pl

    check_format(format)
    d = open_sweep(db, sweep)
    check_metrics(d, sweep, [metric])
    # an adaptive sweep's same-LR answers: its leaderboard's anytime-valid rows (its own rule)
    f = d.findings(sweep, metric, min_effect=min_effect, correction=correction,
                   family_error=family_error, decide=stored_rule(d, sweep, metric))
    frame = pl.DataFrame(f.rows(), schema=dict.fromkeys(ROW_COLUMNS, pl.String))
    summary = findings_lines(d, sweep, f)
    title = f"{sweep}: findings on {metric}"
    if frame.is_empty() and format not in ("csv", "json"):  # the answers say why
        out.print(summary)
        return
    # the rule is in each answer's words; csv/json keep every column (render's rule)
    render(out, frame, format, title=title, summary=summary,
           columns=[c for c in ROW_COLUMNS if c != "rule"])
