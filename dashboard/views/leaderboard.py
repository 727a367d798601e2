"""Leaderboard: which variants beat the baseline beyond noise, at a glance.

Top to bottom: the study's answers (db.findings, as every surface says them first; the
multiplicity correction is a control: results_db/analysis/multiplicity.py), a Δ ± CI dot
plot vs the baseline in each variant's colour (the verdict as marker shape and label, each seed
as a small dot; a row without a CI is named in the "n = 1" warning, not drawn), then the ranked
table (db.leaderboard: mean ± std, Δ in % and in the metric's units with CI, verdict, the seeds
that would confirm the observed Δ, wall time and tokens beside it, the LR and the dimension
columns that vary; each row links to Run detail), best vs best (db.best_vs_best: each LR
picked on other seeds; a variant run at one LR is said to have no best LR), and the main
effects of each gate dimension with the condition each holds under (db.effects: LR, axes,
metric, seeds). Nothing here computes a statistic.
"""

from __future__ import annotations

import urllib.parse

import polars as pl
import streamlit as st

from contract.analysis_defaults import CORRECTION, FAMILY_ERROR, METRIC
from contract.metrics import PARAMS_TOTAL, TOKENS, WALL_S
from dashboard import charts, compare, data, palette
from dashboard.boardtable import DELTA_PCT, display_frame
from dashboard.mdtext import code, md
from dashboard.status import STATES, nothing_to_rank, unranked_variants
from dashboard.tables import (
    apply_filters,
    fmt_delta_ci,
    fmt_lr,
    metric_order,
    row_labels,
)
from dashboard.views.common import show_chart, show_rows, table_height, watch
from dashboard.views.decide import decide_rule
from dashboard.views.findings import show_lines
from results_db.analysis.columns import FIRST_STAT
from results_db.analysis.compare import seed_deltas as run_deltas
from results_db.analysis.multiplicity import CORRECTIONS, HOLM, NONE
from results_db.analysis.summary import board_rule
from results_db.schema.vocab import RESULT_STATES, higher_is_better

# verdict order of the "by verdict" sort: the conclusions first, the reference, then the rest
_VERDICT_ORDER = ("better", "baseline", "within noise", "needs", "n = 1", "no data", "worse")
COST = {WALL_S: "wall s", TOKENS: "tokens"}  # shown beside Δ when the runs report them
MAX_PARALLEL = 60  # rows drawn as parallel-coordinate lines (as charts.delta_dots' max_rows)
FLOPS = "FLOPs ≈6NT"  # 6 x params/total x tokens: training compute (forward + backward)


def default_ascending(metric: str) -> bool:
    """Losses/PPL/probes rank lowest first; benchmark scores highest first (the metric's
    direction as results_db.schema.vocab defines it)."""
    return not higher_is_better(metric)


def verdict_rank(verdict: str | None) -> int:
    for i, key in enumerate(_VERDICT_ORDER):
        if (verdict or "no data").startswith(key):
            return i
    return len(_VERDICT_ORDER)


def _filters(board: pl.DataFrame) -> dict[str, list[str]]:
    """One multiselect per dimension column that varies in this sweep."""
    lo = board.columns.index("lr") if "lr" in board.columns else 2
    dims = [c for c in board.columns[lo:board.columns.index(FIRST_STAT)]
            if board[c].cast(pl.String).n_unique() > 1]
    chosen: dict[str, list[str]] = {}
    if not dims:
        return chosen
    cols = st.columns(min(len(dims), 4))
    for i, col in enumerate(dims):
        values = board[col].cast(pl.String).fill_null("–").unique().sort().to_list()
        chosen[col] = cols[i % len(cols)].multiselect(col, values, key=f"lb_f_{col}")
    return chosen


ONE_LR = " (its only LR)"  # a variant run at one LR has no best LR: its row says so


def best_lr_rows(board: pl.DataFrame) -> pl.DataFrame:
    """Each variant's row at its best LR (the smallest db.leaderboard rank; a variant with no
    ranked row keeps its first), in board order; the label of a variant that ran at one LR
    says so (ONE_LR) instead of passing its only LR off as tuned."""
    best = board.with_row_index("_i").sort("rank", "_i", nulls_last=True) \
        .group_by("variant", maintain_order=True).first()
    out = board.with_row_index("_i").filter(pl.col("_i").is_in(best["_i"].to_list())) \
        .drop("_i")
    if "row" not in out.columns:
        return out
    n_lrs = board.group_by("variant").agg(pl.col("lr").n_unique().alias("_n"))
    out = out.join(n_lrs, on="variant", how="left", maintain_order="left")
    return out.with_columns(row=pl.when(pl.col("_n") < 2).then(pl.col("row") + ONE_LR)
                            .otherwise(pl.col("row"))).drop("_n")


def run_links(url: str, sweep: str) -> dict[str, str]:
    """{group_key: link to Run detail of the group's first run} (relative URL)."""
    runs = data.runs(url, sweep)
    first = runs.sort("id").group_by("group_key", maintain_order=True).first()
    q = {"page": "Run detail", "sweep": sweep}
    return {g: "?" + urllib.parse.urlencode({**q, "run": rid})
            for g, rid in zip(first["group_key"].to_list(), first["id"].to_list(), strict=True)}


def _summary(sentence: str | None, board: pl.DataFrame) -> None:
    """An adaptive sweep's own sentence, and the rows without an error bar (one seed, or
    compared with a one-seed baseline): said here, not drawn on the chart. Names are users'
    text: escaped, never read as markdown."""
    if sentence:
        st.markdown(f"**{md(sentence)}**")
    # the baseline is the reference the chart draws at 0, not a row without an error bar
    single = board.filter(~pl.col("is_baseline")
                          & ((pl.col("n") == 1) | (pl.col("verdict") == "n = 1")))
    if single.height:
        names = ", ".join(md(r) for r in single["row"].head(6).to_list())
        st.warning(f"n = 1: no error bar for {single.height} row(s) "
                   f"({names}{', ...' if single.height > 6 else ''}): one seed cannot "
                   "separate an effect from seed noise, so the chart leaves them out; add "
                   "seeds.")


def with_ci(board: pl.DataFrame) -> pl.DataFrame:
    """The rows the Δ chart draws: the baseline's and those with a CI (a change without one
    is a single seed's, said in the n = 1 warning instead)."""
    return board.filter(pl.col("is_baseline") | pl.col("ci_low_pct").is_not_null())


def _unranked(url: str, sweep: str, board: pl.DataFrame, states: tuple[str, ...]) -> None:
    """The variants the board has no row for (none of their runs finished in ``states``): a
    variant that only failed must not vanish without a word."""
    missing = unranked_variants(data.runs(url, sweep), board["variant"].unique().to_list())
    if missing:
        listed = ", ".join(f"{md(v)} ({c})" for v, c in missing[:6])
        st.info(f"No result yet for {len(missing)} variant(s) in state {' or '.join(states)}: "
                f"{listed}{', ...' if len(missing) > 6 else ''}.")


def cost_columns(url: str, sweep: str, states: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """{"wall s": {group_key: mean}, "tokens": {...}, FLOPS: {...}}: the seed-group means of
    the runs' cost summaries (db.leaderboard on that metric), for the metrics the sweep
    reports; FLOPs ≈ 6 N T from the group's params/total and tokens where both exist."""
    names = set(data.summary_names(url, sweep))
    out = {}
    for metric, col in COST.items():
        if metric in names:
            b = data.leaderboard(url, sweep, metric, True, states)
            out[col] = dict(zip(b["group_key"].to_list(), b["mean"].to_list(), strict=True))
    if "tokens" in out and PARAMS_TOTAL in names:  # training compute, the usual estimate
        b = data.leaderboard(url, sweep, PARAMS_TOTAL, True, states)
        params = dict(zip(b["group_key"].to_list(), b["mean"].to_list(), strict=True))
        out[FLOPS] = {g: 6.0 * params[g] * t for g, t in out["tokens"].items()
                      if t is not None and params.get(g) is not None}
    return out


def seed_deltas(url: str, sweep: str, metric: str, board: pl.DataFrame,
                states: tuple[str, ...]) -> pl.DataFrame:
    """(row, variant, seed, delta_pct): each run's change vs its row's baseline mean, in % as
    results_db computes every delta_pct (results_db.analysis.compare.seed_deltas), for the dots
    beside each mean ± CI."""
    runs = data.runs(url, sweep).filter(pl.col("status").is_in(list(states)))
    vals = data.summaries(url, sweep, (metric,)).filter(pl.col("name") == metric)
    # cast: an empty read has untyped (Null) columns, which do not join
    ids = runs.select(pl.col("id").cast(pl.Int64).alias("run_id"),
                      pl.col("group_key").cast(pl.String), "seed")
    values = vals.with_columns(pl.col("run_id").cast(pl.Int64)).join(ids, on="run_id")
    labels = board.select(pl.col("group_key").cast(pl.String), "row", "variant")
    return run_deltas(board, values.select("group_key", "seed", "value")) \
        .join(labels, on="group_key").select("row", "variant", "seed", "delta_pct")


def _table(board: pl.DataFrame, url: str, sweep: str, states: tuple[str, ...]) -> None:
    shown = display_frame(board.head(show_rows(board.height, "lb_limit")),
                          run_links(url, sweep), cost_columns(url, sweep, states))
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    variant_of = dict(zip(board["row"].to_list(), board["variant"].to_list(), strict=True))

    def colour(col: pl.Series) -> list[str]:  # the variant's colour, as on every chart
        return [f"color: {colors.get(variant_of.get(v.removesuffix(' (baseline)'), ''), '')}; "
                "font-weight: 600" for v in col]

    styled = shown.to_pandas().style.apply(colour, subset=["variant"])
    st.dataframe(styled, hide_index=True, width="stretch", key="lb_table",
                 height=table_height(shown.height),
                 column_config={
                     "rank": st.column_config.TextColumn("rank", width=45),
                     "n": st.column_config.TextColumn("n", width=35),
                     "runs": st.column_config.LinkColumn("runs", display_text="open ›",
                                                         width=60,
                                                         help="Run detail of this group"),
                     DELTA_PCT: st.column_config.TextColumn(DELTA_PCT, width=170),
                     # "needs >= 1000 seeds" whole: a cut verdict reads as another one
                     "verdict": st.column_config.TextColumn("verdict", width=150)})


def render(url: str, sweep: str) -> None:  # app.py: these pages need a sweep
    st.header(f"Leaderboard — {md(sweep)}")
    watch(url, sweep, "lb")
    names = metric_order(data.summary_names(url, sweep)) or [METRIC]
    c1, c2, c3, c4 = st.columns([2, 1, 2, 1])
    metric = c1.selectbox("Metric", names, index=names.index(METRIC) if METRIC in names else 0,
                          key="lb_metric")
    # keyed per metric: each metric keeps its own direction, defaulting to the natural one
    ascending = c2.toggle("Lower is better", value=default_ascending(metric),
                          key=f"lb_asc_{metric}")
    states = c3.multiselect("Run states", list(STATES), default=list(RESULT_STATES),
                            key="lb_states")
    order = c4.radio("Sort", ["verdict", "rank"], horizontal=True, key="lb_sort")
    correction, family_error = _rule_controls()
    key = tuple(states or RESULT_STATES)
    rule = decide_rule(url, sweep, metric)  # an adaptive sweep: read by its own rule, as the CLI
    board = data.leaderboard(url, sweep, metric, ascending, key, correction, family_error, rule)
    if board.is_empty() or board["mean"].is_null().all():
        st.info(nothing_to_rank(data.runs(url, sweep), key, metric))
        return
    board = board.with_columns(row_labels(board))  # labels over the whole sweep
    # the study's answers first (db.findings, as the CLI's leaderboard and the report say
    # them); the rows below are details, each with its baseline's condition at its LR
    show_lines(data.findings(url, sweep, metric, correction, family_error, rule))
    _summary(data.decide_sentence(url, sweep, rule) if rule is not None else None, board)
    if mix := data.code_mix(url, sweep):  # never silently: other code or packages compared
        st.warning(md(mix))
    _unranked(url, sweep, board, key)
    with st.expander("Filter by dimension"):
        board = apply_filters(board, _filters(board))
    best_lr = board["lr"].n_unique() > 1 and st.toggle(
        "Each variant at its best LR", value=False, key="lb_best_lr",
        help="one row per variant: the LR with its best mean (its Δ stays the one vs the "
             "baseline at that same LR; a variant run at one LR is marked, it has no best "
             "LR); below the table, best vs best: each variant at its own best LR against "
             "the baseline at its own best LR, each LR picked on the other seeds")
    if best_lr:
        board = best_lr_rows(board)
    if order == "verdict":
        board = board.with_columns(_v=pl.col("verdict").map_elements(
            verdict_rank, return_dtype=pl.Int64)).sort("_v", "rank", nulls_last=True).drop("_v")
    colors = palette.colors(data.variants(url, sweep), data.baseline(url, sweep))
    drawn = with_ci(board)
    show_chart(charts.delta_dots(drawn, metric, colors,
                                 seed_deltas(url, sweep, metric, drawn, key),
                                 ci=_ci_text(board)))
    st.caption(_caption(metric, data.baseline(url, sweep), board_rule(board)))
    _table(board, url, sweep, key)
    if best_lr:
        _best_vs_best(url, sweep, metric, ascending, key)
    _parallel(board, metric, colors)
    _effects(url, sweep, metric)


def _rule_controls() -> tuple[str, float]:
    """The multiplicity rule the verdicts are read by (results_db/analysis/multiplicity.py):
    by default each row's CI at 95 %, as the CLI."""
    k1, k2, _ = st.columns([2, 1, 3])
    correction = k1.selectbox(
        "Multiplicity correction", list(CORRECTIONS), index=CORRECTIONS.index(CORRECTION),
        key="lb_correction", help="none: each row's CI at 1 - error rate; bonferroni / holm: "
                                  "the error rate holds over all rows at once")
    family_error = float(k2.number_input(
        "Error rate", min_value=0.001, max_value=0.5, value=FAMILY_ERROR, step=0.01,
        format="%.3f", key="lb_family_error",
        help="per row without a correction, family-wise with one"))
    return correction, family_error


def _ci_text(board: pl.DataFrame) -> str:
    """The CI the chart draws, named by the rule it is the interval of: '95 % CI',
    'Bonferroni 99.6 % CI'; Holm has no interval of its own (results_db/analysis/
    multiplicity.py), so under Holm the axis names Bonferroni's and the verdicts' rule."""
    if "ci_level" not in board.columns or board["ci_level"].null_count() == board.height:
        return "95 % CI"
    rule = str(board["correction"][0]) if "correction" in board.columns else NONE
    level = f"{100 * float(board['ci_level'].drop_nulls()[0]):.4g} % CI"
    if rule == HOLM:
        return f"Bonferroni {level} (verdicts by Holm)"
    return level if rule == NONE else f"{rule.capitalize()} {level}"


def _best_vs_best(url: str, sweep: str, metric: str, ascending: bool,
                  states: tuple[str, ...]) -> None:
    """Each variant at its own best LR against the baseline at *its* best LR (the table's Δ
    is at the same LR): what "does the gate win once both are tuned" asks, with each LR
    picked on other seeds than the one it judges (db.best_vs_best)."""
    frame = data.best_vs_best(url, sweep, metric, ascending, states)
    if frame.is_empty():
        return
    st.subheader("Best vs best")
    st.caption(f"Each variant at its own best LR vs the baseline at its own best LR "
               f"({metric}; 95 % CI, paired by seed where the seeds match, else Welch). Each "
               "seed is judged at the LR its other seeds pick (leave-one-seed-out: 'judged "
               "at'), so the pick does not ride on the noise it is judged by; a variant run at "
               "one LR has no best LR and a single seed no held-out pick: said, not "
               "compared.")
    shown = compare.best_vs_best_display(frame)
    st.dataframe(shown, hide_index=True, key="lb_best_vs_best",
                 height=table_height(shown.height))


def _parallel(board: pl.DataFrame, metric: str, colors: dict[str, str]) -> None:
    """Parallel coordinates over the swept dimensions that vary, then the metric and Δ%."""
    if not compare.dimension_columns(board) or board.height < 2:
        return
    st.subheader("Parallel coordinates over the swept dimensions")
    shown = board.head(MAX_PARALLEL)  # a 3,000-group sweep: its first rows, as the dot plot
    more = f" (the first {MAX_PARALLEL} of {board.height}; filter to see others)" \
        if board.height > MAX_PARALLEL else ""
    st.caption(f"One line per row above{more}, across each dimension that varies, then its "
               f"mean {metric} and Δ% vs baseline; hover a line for its row.")
    show_chart(charts.parallel(compare.parallel_frame(shown, metric), colors))


def _caption(metric: str, baseline: str | None, rule: str = "95 % CI") -> str:
    if baseline is None:
        return (f"{metric} over seeds. No baseline: no variant is named `baseline` and none is "
                "the plain ungated model, so no Δ, CI or verdict (add a `baseline: {}` "
                "variant).")
    return (f"{metric} over seeds; Δ vs baseline {code(baseline)} at the same LR (paired by "
            f"seed where seeds match, else Welch); {md(rule)}; marker = verdict, small dots = "
            "each seed vs the baseline mean. \"needs >= k seeds\": seeds per variant to "
            "resolve a ±1 % effect at 80 % power; \"seeds for Δ\": to confirm the effect "
            "observed.")


def effects_display(eff: pl.DataFrame) -> pl.DataFrame:
    """db.effects as the strings the page shows, each number with the condition it holds
    under (db.effects returns them): the LR, the other axes where the sweep has any, the
    seeds behind the level (and whether the fit paired them); the metric is the caption's."""
    more_axes = any(c and "," in c for c in eff["context"].to_list())
    rows = []
    for r in eff.iter_rows(named=True):
        row = {"dimension": r["dimension"], "value": r["value"], "lr": fmt_lr(r["lr"])}
        if more_axes:
            row["at"] = r["context"] or "–"
        seeds = "–" if r["n_seeds"] is None else \
            f"{r['n_seeds']}{' (paired)' if r['paired'] else ''}"
        row.update({"variants": str(r["n_variants"]), "runs": str(r["n_runs"]), "seeds": seeds,
                    "mean Δ% [95% CI]": fmt_delta_ci(r["mean_delta_pct"], r["ci_low_pct"],
                                                     r["ci_high_pct"]),
                    "verdict": r["verdict"] or "–"})
        rows.append(row)
    return pl.DataFrame(rows, schema={c: pl.String for c in rows[0]}) if rows else \
        pl.DataFrame(schema={"dimension": pl.String})


def _effects(url: str, sweep: str, metric: str) -> None:
    eff = data.effects(url, sweep, metric)
    if eff.is_empty():
        return
    st.subheader("Main effects of each dimension")
    st.caption(f"Per dimension value and LR (a main effect holds at its LR only): the mean Δ% "
               f"in {metric} vs the baseline at that LR over the variants that have it (the "
               "other dimensions averaged out by a least-squares fit over the runs), with its "
               "95 % CI; 'no CI' where the fit leaves no residual df, 'one variant' where one "
               "configuration is not a main effect.")
    shown = effects_display(eff)
    st.dataframe(shown, hide_index=True, key="lb_effects", height=table_height(shown.height))
