"""Ablation tables in the paper's layout (db.ablation_table formatted by dashboard/ablation.py),
with the paper's figures, its Δ% and whether ours agrees in direction; downloadable as CSV,
Markdown and LaTeX. The stability table comes with the LR stability view for LR sweeps; the
quality table with the sweep's 2x2 (dashboard/factorialtable.py), when it has one."""

from __future__ import annotations

from typing import cast

import streamlit as st

from contract.analysis_defaults import METRIC
from dashboard import data
from dashboard.ablation import KINDS, SCALE_CAVEAT, Kind
from dashboard.export import to_csv, to_latex, to_markdown
from dashboard.factorialtable import factorial_text
from dashboard.mdtext import code, md
from dashboard.status import nothing_to_rank
from dashboard.views import stability
from dashboard.views.common import show_rows, table_height, watch
from dashboard.views.decide import decide_rule
from results_db.schema.vocab import RESULT_STATES

FINISHED = tuple(RESULT_STATES)  # the states db.ablation_table averages (its default)
# short columns at their content's width, so the Agree column stays on a 1500 px screen
CONCLUSION_FIRST = ("Variant", "Method", "PPL", "ΔPPL [95% CI]", "Verdict", "Agree",
                    "Paper PPL (Δ%)", "n")
NARROW = {"Act": 80, "Score shape": 85, "Added": 55, "n": 35, "Paper +M": 70, "Verdict": 125,
          "Agree": 115, "Paper PPL (Δ%)": 120, "PPL": 115, "ΔPPL [95% CI]": 150}


def render(url: str, sweep: str) -> None:  # app.py: these pages need a sweep
    st.header(f"Ablation tables — {md(sweep)}")
    watch(url, sweep, "ab")
    kinds = list(KINDS)
    kind = st.radio("Table", kinds, format_func=KINDS.__getitem__, key="ab_kind",
                    horizontal=True)
    with_paper = st.toggle("Show the paper's figures beside ours", value=True, key="ab_paper")
    if with_paper and kind != "longctx":
        st.warning(f"**Different scale.** {SCALE_CAVEAT}", icon="⚠️")
    if kind == "stability" and sweep is not None:
        stability.render_view(url, sweep, key="ab_st")
    table = data.ablation_table(url, sweep, cast(Kind, kind), with_paper)  # one of KINDS
    if table.display.is_empty():  # db.ablation_table ranks succeeded runs
        st.info(nothing_to_rank(data.runs(url, sweep), FINISHED, "a result"))
        return
    if kind == "longctx" and not any(c.endswith(("PPL", "retrieval"))
                                     for c in table.display.columns):
        st.info("No long-context evaluation in this sweep yet (summaries "
                "`longctx/<method>/<f>x/ppl`; enable `eval.longctx` in the sweep).")
        return
    st.caption(_caption(kind, table.baseline))
    shown = table.display.head(show_rows(table.display.height, "ab_limit"))
    # on screen, the conclusion first (Δ, verdict, the paper's direction), the descriptive
    # columns after; the exports keep the paper's column order
    if kind == "quality":
        first = [c for c in CONCLUSION_FIRST if c in shown.columns]
        shown = shown.select(first + [c for c in shown.columns if c not in first])
    st.dataframe(shown, hide_index=True, width="stretch", key="ab_table",
                 height=table_height(shown.height),
                 column_config={c: st.column_config.TextColumn(c, width=w)
                                for c, w in NARROW.items() if c in shown.columns})
    stem = f"{sweep}-{kind}"
    c1, c2, c3 = st.columns(3)
    c1.download_button("CSV", to_csv(table.numeric), f"{stem}.csv", "text/csv", key="dl_csv")
    c2.download_button("Markdown", to_markdown(table.display), f"{stem}.md", "text/markdown",
                       key="dl_md")
    c3.download_button("LaTeX", to_latex(table.display, caption=f"{sweep}: {KINDS[kind]}"),
                       f"{stem}.tex", "text/x-tex", key="dl_tex")
    if kind == "quality":
        _factorial(url, sweep)


def _factorial(url: str, sweep: str) -> None:
    """The sweep's 2x2 (db.factorial), only when it has one: the cells beside the contrasts."""
    # an adaptive sweep: read by its own rule, as the CLI does (db.factorial's metric)
    text = factorial_text(data.factorial(url, sweep, decide_rule(url, sweep, METRIC)))
    if text is None:
        return
    st.subheader(md(text.title))
    st.markdown(md(text.sentence))
    cells, contrasts = st.columns([4, 3])
    cells.dataframe(text.grid, hide_index=True, key="ab_2x2_cells")
    cells.caption(md(text.grid_caption))
    contrasts.dataframe(text.effects, hide_index=True, key="ab_2x2_effects")
    contrasts.caption(md(text.effects_caption))


def _caption(kind: str, baseline: str | None) -> str:
    if kind == "longctx":
        return ("mean ± std over seeds; columns: RoPE extension method and evaluated length as a "
                "multiple of the trained one (1x: plain RoPE for every method). The paper's "
                "Table 5 reports RULER accuracy at 4k-128k tokens, not PPL, so no paper column.")
    if baseline is None:
        return ("mean ± std over seeds; no baseline (no variant is named `baseline` and none is "
                "the plain ungated model), so no Δ or verdict; one row per variant and LR.")
    return (f"mean ± std over seeds; Δ vs baseline {code(baseline)} with its 95 % CI "
            "(paired by seed where seeds match) and the verdict; one row per variant and LR.")
