"""The report's first page: the study's answers (db.findings) as the CLI and the dashboard say
them, one table per question (the tuned-vs-tuned one among them), and the scaling readings
with the LR and the step each was read at. Formatting only: results_db words every finding
(Findings.lines, Findings.rows) and computes every number."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from dashboard.report.model import Block, Section, Table
from dashboard.scalingtable import trend_table
from results_db.analysis.columns import ROW_COLUMNS
from results_db.analysis.findings import Findings

if TYPE_CHECKING:
    from results_db.analysis.scaling import Scaling

SHOWN = [c for c in ROW_COLUMNS if c not in ("question", "rule")]


def answers(f: Findings, sc: Scaling | None) -> Section:
    """The first page: the answers in words, each question's findings, the scaling table."""
    blocks: list[Block] = []
    rows = f.rows()
    for i, a in enumerate(f.answers, 1):
        mine = [{c: r[c] for c in SHOWN} for r in rows if r["question"] == a.question]
        blocks.append(Table(f"answer-{i}", pl.DataFrame(mine, schema=dict.fromkeys(
            SHOWN, pl.String)), f"{i}. {a.question} -- frame: {a.frame}; condition: "
            f"{a.condition}; rule: {a.rule}"))
    if sc is not None and sc.trends.height:
        blocks.append(scaling_table(sc))
    return Section("answers", "Answers", tuple(f.lines()), tuple(blocks))


def scaling_table(sc: Scaling) -> Table:
    return Table("scaling-table", trend_table(sc.trends),
                 f"Δ {sc.metric} vs the baseline at the same LR, 95 % CI over seeds, read where "
                 "'read at' says: the end of training, or mid-training at equal FLOPs (the "
                 "gate costs FLOPs, so the baseline is read where it spent the same compute). "
                 "A trend's verdict is about its slope (flat only inside +-1 pp per decade).")
