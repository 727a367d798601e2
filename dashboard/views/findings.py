"""The first screen: the study's answers (db.findings, results_db/analysis/findings.py), each
question with its frame, condition and rule, then its findings one row per variant. The page
formats only: the sentences and the rows are results_db's, the same the CLI's ``findings``
command and the report's first page print."""

from __future__ import annotations

import polars as pl
import streamlit as st

from contract.analysis_defaults import METRIC
from dashboard import data
from dashboard.mdtext import md
from dashboard.views.common import table_height, watch
from dashboard.views.decide import decide_rule
from results_db.analysis.columns import ROW_COLUMNS
from results_db.analysis.findings import Findings

# the columns of a question's table (the rule is said once, under it)
SHOWN = [c for c in ROW_COLUMNS if c not in ("question", "rule")]


def answers_frame(f: Findings, question: str) -> pl.DataFrame:
    """The rows of one question, as Findings.rows words them."""
    rows = [{c: r[c] for c in SHOWN} for r in f.rows() if r["question"] == question]
    return pl.DataFrame(rows, schema={c: pl.String for c in SHOWN})


def show_lines(f: Findings) -> None:
    """The answers in words, as every surface prints them first (Findings.lines)."""
    head, *rest = f.lines()
    st.markdown(f"**{md(head)}**")
    for line in rest:
        st.markdown(md(line))


def render(url: str, sweep: str) -> None:
    st.header("Answers")
    watch(url, sweep, "fi")
    # an adaptive sweep's answers read by its own rule, as the CLI's (db.findings' metric)
    f = data.findings(url, sweep, METRIC, decide=decide_rule(url, sweep, METRIC))
    show_lines(f)
    for a in f.answers:
        st.subheader(a.question)
        st.caption(md(f"Frame: {a.frame}. Condition: {a.condition}. Rule: {a.rule}."))
        table = answers_frame(f, a.question)
        st.dataframe(table, hide_index=True, width="stretch", height=table_height(table.height),
                     key=f"fi_{a.question}",
                     column_config={"note": st.column_config.TextColumn(width="large"),
                                    "LR": st.column_config.TextColumn(width="medium")})
    st.caption("Per-LR rows, curves and probes are details: the Leaderboard lists every "
               "(variant, LR) row, each with the condition of its baseline there.")
