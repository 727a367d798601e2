"""The conclusion commands: leaderboard, table, effects, factorial, scaling, stability.

They compute nothing: results_db's AnalysisMixin decides the baseline, the statistics, the
CIs and the verdicts (``db.findings``, ``db.leaderboard``, ``db.ablation_table``,
``db.effects``, ``db.factorial``, ``db.scaling``, ``db.stability``); these commands only
choose columns and format them (orchestrator/cli/frame_format.py). The DB is opened read-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from contract.analysis_defaults import (
    CORRECTION,
    FAMILY_ERROR,
    METRIC,
    MIN_EFFECT,
    STABILITY_METRIC,
    STABILITY_TOL,
)
from orchestrator.cli.app import DbOpt, app, check_metrics, open_sweep, out, split_csv
from orchestrator.cli.frame_format import check_format, render
from orchestrator.cli.read import stored_rule
from results_db.analysis.columns import shown_columns
from results_db.analysis.labels import DIVERGED_SEEDS, lr_text
from results_db.analysis.summary import best_vs_best_sentence, board_rule, effects_sentence
from results_db.schema.vocab import higher_is_better

if TYPE_CHECKING:
    import polars as pl

    from results_db import ResultsDB
    from results_db.analysis.stability import Stability

FormatOpt = Annotated[str, typer.Option("--format", help="table|csv|json|markdown|latex")]
MetricOpt = Annotated[str, typer.Option("--metric", help="Summary metric, e.g. val/ppl")]
EffectOpt = Annotated[float, typer.Option(
    "--min-effect", min=0.0, max=10.0,
    help="Smallest relative change that matters (0.01 = 1 %); sets 'needs >= k seeds'")]

CorrectionOpt = Annotated[str, typer.Option(
    "--correction", help="Multiplicity correction over the rows: none (each CI at 1 - "
                         "family error), bonferroni or holm (family-wise error)")]
FamilyErrorOpt = Annotated[float, typer.Option(
    "--family-error", min=1e-6, max=0.5,
    help="Error rate: per row with --correction none, else over all rows")]

# Human formats show these; csv/json show every column (dimensions, keys, params too).
BOARD_COLUMNS = shown_columns()  # results_db's leaderboard schema


def with_mix(d: ResultsDB, sweep: str, summary: str) -> str:
    """``summary`` and, on its own line, results_db's sentence saying that the runs compared
    came from different code or packages (db.code_mix), when they did: never silently."""
    note = d.code_mix(sweep).sentence
    return "\n".join(t for t in (summary, note) if t)


def with_ci_text(frame: pl.DataFrame, low: str = "ci_low_pct", high: str = "ci_high_pct",
                 name: str = "ci") -> pl.DataFrame:
    """'[-1.2, +0.3] %' from the CI bounds results_db computed (formatting only)."""
    import polars as pl

    if low not in frame.columns:
        return frame
    text = [None if lo is None or hi is None else f"[{lo:+.2f}, {hi:+.2f}] %"
            for lo, hi in zip(frame[low].to_list(), frame[high].to_list())]
    return frame.with_columns(pl.Series(name, text, dtype=pl.Utf8))


@app.command()
def leaderboard(sweep: str, db: DbOpt = None, metric: MetricOpt = METRIC,
                min_effect: EffectOpt = MIN_EFFECT, correction: CorrectionOpt = CORRECTION,
                family_error: FamilyErrorOpt = FAMILY_ERROR,
                best_vs_best: Annotated[bool, typer.Option(
                    "--best-vs-best", help="Each variant at its best LR vs the baseline at its "
                    "own, each LR picked on the other seeds (leave-one-seed-out)")] = False,
                lr: Annotated[float | None, typer.Option(
                    "--lr", min=1e-12, max=1e3,
                    help="With --best-vs-best: compare both at this declared LR "
                         "instead")] = None,
                format: FormatOpt = "table") -> None:
    """Variants ranked by METRIC with n, mean, std, the CI of the change vs the baseline
    (95 % per row, or corrected over the rows: --correction) and a verdict (better / worse /
    within noise / needs >= k seeds); the summary names the rule. --best-vs-best: each
    variant at its best LR against the baseline at its own (a variant run at one LR has
    none, said in words)."""
    check_format(format)
    d = open_sweep(db, sweep)
    check_metrics(d, sweep, [metric])
    if best_vs_best or lr is not None:
        _best_vs_best(d, sweep, metric, min_effect, lr, format)
        return
    rule = stored_rule(d, sweep, metric)
    board = d.leaderboard(sweep, metric, min_effect=min_effect, correction=correction,
                          family_error=family_error, decide=rule)
    # the study's answers first (db.findings); the per-LR rows below are details, each with
    # its baseline's condition at its LR. An adaptive sweep's seeds were added after looking:
    # its own anytime-valid rule says what its rows and answers show (results_db/analysis/
    # sequential.py)
    said = d.findings(sweep, metric, min_effect=min_effect, correction=correction,
                      family_error=family_error, decide=rule).text()
    if rule is not None:
        said += "\n" + d.decide_sentence(sweep, rule)
    summary = with_mix(d, sweep, said + f"\nEvery (variant, LR) row below ({board_rule(board)}):")
    if format in ("csv", "json"):
        render(out, board, format, title=f"{sweep}: {metric}", summary=summary)
        return

    shown = with_ci_text(board)
    better = "higher" if higher_is_better(metric) else "lower"
    render(out, shown, format, title=f"{sweep}: {metric} ({better} is better)",
           summary=summary, columns=BOARD_COLUMNS)


BEST_COLUMNS = ["label", "n_lrs", "best_lr", "baseline_best_lr", "picks", "n",
                "delta_pct", "ci", "verdict", "note"]


def _best_vs_best(d: ResultsDB, sweep: str, metric: str, min_effect: float,
                  lr: float | None, format: str) -> None:
    frame = d.best_vs_best(sweep, metric, lr=lr, min_effect=min_effect)
    summary = with_mix(d, sweep, best_vs_best_sentence(frame, sweep, metric))
    title = f"{sweep}: {metric}, best vs best"
    if format in ("csv", "json"):
        render(out, frame, format, title=title, summary=summary)
        return
    render(out, with_ci_text(frame), format, title=title, summary=summary,
           columns=BEST_COLUMNS)


@app.command()
def table(sweep: str, db: DbOpt = None,
          paper: Annotated[bool, typer.Option(
              "--paper", help="Paper layout: one 'mean ± std' column per metric + verdicts")
          ] = False,
          metrics: Annotated[str | None, typer.Option(
              help="Comma-separated metrics [default: results_db's ablation metrics]")] = None,
          min_effect: EffectOpt = MIN_EFFECT, format: FormatOpt = "table") -> None:
    """The ablation table: per variant (and LR) every metric with its CI and verdict, the
    verdict summary on top."""

    check_format(format)
    d = open_sweep(db, sweep)
    names = split_csv(metrics)
    check_metrics(d, sweep, names or [], "--metrics")
    kw = {"metrics": names} if names else {}
    t = d.ablation_table(sweep, min_effect=min_effect, **kw)
    first = (names or [METRIC])[0]
    summary = with_mix(d, sweep, d.findings(sweep, first, min_effect=min_effect,
                                            decide=stored_rule(d, sweep, first)).text())
    if format in ("csv", "json"):
        render(out, t, format, title=f"{sweep}: ablation table", summary=summary)
        return
    ms = _table_metrics(t)
    shown = paper_layout(t, ms) if paper else long_layout(t, ms)
    render(out, shown, format, title=f"{sweep}: ablation table", summary=summary)


def paper_layout(t: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """One row per variant (and LR), one 'mean ± std (verdict)' cell per metric."""
    import polars as pl

    cells = {m: [txt if v in ("baseline", None) else f"{txt} ({v})" for txt, v in
                 zip(t[f"{m}:text"].to_list(), t[f"{m}:verdict"].to_list())] for m in metrics}
    keep = [c for c in ("variant", "lr", "n", "max_stable_lr") if c in t.columns]
    return t.select(keep).with_columns(pl.Series(m, v, dtype=pl.Utf8) for m, v in cells.items())


def long_layout(t: pl.DataFrame, metrics: list[str]) -> pl.DataFrame:
    """One row per (variant, LR, metric): n, mean ± std, change %, its 95 % CI, verdict."""
    import polars as pl

    parts = []
    for m in metrics:
        part = with_ci_text(t, f"{m}:ci_low_pct", f"{m}:ci_high_pct", "ci")
        parts.append(part.select(
            "variant", "lr", pl.lit(m).alias("metric"), pl.col(f"{m}:n").alias("n"),
            pl.col(f"{m}:text").alias("mean ± std"), pl.col(f"{m}:delta_pct").alias("delta_pct"),
            "ci", pl.col(f"{m}:verdict").alias("verdict")))
    return pl.concat(parts, how="vertical_relaxed")


def _table_metrics(t: pl.DataFrame) -> list[str]:
    """The metrics of an ablation table, in column order (columns are '<metric>:<stat>')."""
    seen: list[str] = []
    for c in t.columns:
        m = c.rsplit(":", 1)[0] if ":" in c else None
        if m and m not in seen:
            seen.append(m)
    return seen


EFFECT_COLUMNS = ["lr", "dimension", "value", "n_variants", "n_runs", "mean_delta_pct", "ci",
                  "df", "verdict"]


@app.command()
def effects(sweep: str, db: DbOpt = None, metric: MetricOpt = METRIC,
            min_effect: EffectOpt = MIN_EFFECT, format: FormatOpt = "table") -> None:
    """Main effect of each gate dimension at each learning rate: the change vs the baseline
    for each value, averaged over the other dimensions by a least-squares fit over the runs
    (estimated marginal means), with a 95 % CI and a verdict; the verdict sentence on top."""
    check_format(format)
    d = open_sweep(db, sweep)
    check_metrics(d, sweep, [metric])
    eff = d.effects(sweep, metric, min_effect=min_effect)

    summary = with_mix(d, sweep, effects_sentence(eff, sweep, metric))
    title = f"{sweep}: main effects on {metric}"
    if format in ("csv", "json"):
        render(out, eff, format, title=title, summary=summary)
        return
    shown = with_ci_text(eff)
    render(out, shown, format, title=title, summary=summary, columns=EFFECT_COLUMNS)


FACTORIAL_COLUMNS = ["lr", "row", "name", "n", "estimate_pct", "ci", "verdict"]


@app.command()
def factorial(sweep: str, db: DbOpt = None, metric: MetricOpt = METRIC,
              min_effect: EffectOpt = MIN_EFFECT, format: FormatOpt = "table") -> None:
    """The sweep's 2x2 (sparse = NSA with equal branch weights or dense, x gated = the G1
    gate or none): each cell's change vs the baseline with its CI and verdict (the
    leaderboard's rows), the two main effects and their interaction over the seeds every cell
    ran, with CIs corrected over the 3 (Bonferroni) and verdicts; the sentence on top. A sweep
    with a decide: rule on METRIC is read by it (anytime-valid intervals, its margin and error
    rate). A sweep without that 2x2 gets one line saying what is missing."""
    check_format(format)
    d = open_sweep(db, sweep)
    check_metrics(d, sweep, [metric])
    # an adaptive sweep: read by its own rule, as leaderboard
    fac = d.factorial(sweep, metric, min_effect=min_effect,
                      decide=stored_rule(d, sweep, metric))
    if not fac.found:  # one line, whatever the terminal's width
        out.print(fac.sentence(), soft_wrap=True)
        return
    summary = with_mix(d, sweep, f"{fac.sentence()}\nCells: the leaderboard's rows "
                                 f"({fac.cell_rule}).")
    title = f"{sweep}: 2x2 {fac.design.name} on {metric}"
    frame = fac.table()
    if format in ("csv", "json"):
        render(out, frame, format, title=title, summary=summary)
        return
    factors = [fac.design.a.name, fac.design.b.name]
    render(out, with_ci_text(frame), format, title=title, summary=summary,
           columns=[*FACTORIAL_COLUMNS[:3], *factors, *FACTORIAL_COLUMNS[3:]])


# every reading with its LR and its step (a change at equal compute is read mid-training)
SCALING_TRENDS = ["variant", "lr", "size", "x", "step", "last_step", "n_points", "n_seeds",
                  "delta_pct_from", "delta_pct_to", "ci", "slope", "slope_ci",
                  "flops_overhead_pct", "verdict"]
SCALING_POINTS = ["variant", "lr", "size", "step", "tokens", "flops", "n", "delta_pct", "ci",
                  "iso_delta_pct", "iso_ci"]


@app.command()
def scaling(sweep: str, db: DbOpt = None, metric: MetricOpt = METRIC,
            points: Annotated[bool, typer.Option(
                "--points", help="Print the delta at every evaluation step instead of the "
                                 "trends")] = False,
            min_effect: Annotated[float, typer.Option(
                "--min-effect", min=0.0, max=10.0,
                help="Smallest relative change that matters (0.01 = 1 %): 'flat' and 'within "
                     "noise' need the CI inside +-1 pp per decade / +-1 %")] = MIN_EFFECT,
            format: FormatOpt = "table") -> None:
    """Does the gain survive scale? The paired change vs the baseline against tokens (every
    evaluation step), parameters and training FLOPs, with 95 % CIs over seeds; the slope per
    decade with its CI, and the change at equal compute (the gate costs FLOPs). Words by the
    leaderboard's rule: flat / within noise only when the CI lies inside the margin, else
    inconclusive."""
    check_format(format)
    d = open_sweep(db, sweep)
    check_metrics(d, sweep, [metric])
    sc = d.scaling(sweep, metric, min_effect=min_effect)
    frame = sc.points if points else sc.trends
    title = f"{sweep}: {metric} vs scale" + (" (every evaluation step)" if points else "")
    summary = with_mix(d, sweep, "\n".join(sc.said(sweep)))
    if format in ("csv", "json"):
        render(out, frame, format, title=title, summary=summary)
        return
    if frame.is_empty():
        out.print(summary)
        return
    shown = with_ci_text(frame)
    if points:
        shown = with_ci_text(shown, "iso_ci_low_pct", "iso_ci_high_pct", "iso_ci")
    else:
        import polars as pl

        shown = shown.with_columns(pl.Series("slope_ci", [
            None if lo is None or hi is None else f"[{lo:+.2f}, {hi:+.2f}] pp/decade"
            for lo, hi in zip(frame["slope_ci_low"].to_list(), frame["slope_ci_high"].to_list())],
            dtype=pl.Utf8))
    render(out, shown, format, title=title, summary=summary,
           columns=SCALING_POINTS if points else SCALING_TRENDS)


STABILITY_SUMMARY = ["label", "best_lr", "max_stable_lr", "seeds", "seed_msls", "n_lrs",
                     "lrs", "min_diverged_lr", "rel_at_top_lr"]
STABILITY_CURVE = ["label", "lr", "n", "mean", "std", DIVERGED_SEEDS, "loss_spikes",
                   "max_activation", "stable", "delta_pct", "ci", "verdict"]


def stability_frames(st: Stability) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(summary, curve) for printing: ``lrs`` as text (CSV cannot hold a list), ``seeds``
    as 'agree/of', the label first and the lr_group_key hash last."""
    import polars as pl


    lrs = [" ".join(lr_text(v) for v in (x or [])) for x in st.summary["lrs"].to_list()]
    seeds = [f"{a}/{n}" if n else "" for a, n in zip(st.summary["seeds_agree"].to_list(),
                                                      st.summary["n_seeds"].to_list())]
    summary = st.summary.with_columns(pl.Series("lrs", lrs, dtype=pl.String),
                                      pl.Series("seeds", seeds, dtype=pl.String))
    first = ["label", "variant"]
    summary = summary.select(*first, pl.exclude(*first, "lr_group_key"), "lr_group_key")
    curve = st.curve.select(*first, pl.exclude(*first, "lr_group_key"), "lr_group_key")
    return summary, curve


@app.command()
def stability(sweep: str, db: DbOpt = None,
              metric: Annotated[str, typer.Option("--metric")] = STABILITY_METRIC,
              tol: Annotated[float, typer.Option(min=0.0, max=10.0, help=(
                  "Relative tolerance vs the variant's best LR"))] = STABILITY_TOL,
              curve: Annotated[bool, typer.Option(
                  "--curve", help="Print the loss-vs-LR curve instead of the summary")] = False,
              format: FormatOpt = "table") -> None:
    """Learning-rate stability per variant: best LR, max stable LR with how many seeds agree
    (the rule is printed), the outcome in one sentence; with --curve the loss, spikes,
    divergence, max activation and the change vs the baseline (95 % CI) at each LR."""
    check_format(format)
    d = open_sweep(db, sweep)
    check_metrics(d, sweep, [metric])
    st = d.stability(sweep, metric, tol)
    if st is None:
        out.print(f"{sweep}: every variant ran at one learning rate; stability needs an LR "
                  "axis (axes.train.lr or lr_ladder)")
        return
    summary, points = stability_frames(st)
    frame = points if curve else summary
    text = with_mix(d, sweep, f"{st.sentence}\n{st.rule}" if st.sentence else st.rule)
    title = f"{sweep}: {'loss vs LR' if curve else 'stability'} ({metric})"
    if format in ("csv", "json"):
        render(out, frame, format, title=title, summary=text)
        return
    shown = with_ci_text(points) if curve else frame
    render(out, shown, format, title=title, summary=text,
           columns=STABILITY_CURVE if curve else STABILITY_SUMMARY)
