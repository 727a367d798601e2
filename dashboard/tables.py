"""Leaderboard and paper-style ablation tables, built from the results DB's Polars frames.

Pure functions of two frames — ``runs`` (one row per run: id, variant, seed, status, gate
dimension columns, params_gates) and ``summaries`` (long: run_id, name, value) — so they are
tested without Streamlit and reused by the benchmark. Statistics are over seeds: mean, sample
std (ddof=1, null for one seed) and n, per variant; deltas are against the sweep's baseline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from dashboard.labels import FILTER_COLUMNS, activation_label, human_count, method_label
from dashboard.labels import normalize_dims, score_shape

VAL_PPL = "val/ppl"
GATE_SCORE = "probe/gate_score_mean"
MAX_ACT = "probe/max_activation"
FIRST_ATTN = "probe/first_token_attention"
RESULT_STATES: tuple[str, ...] = ("succeeded",)
FINISHED_STATES: tuple[str, ...] = ("succeeded", "diverged")


def add_row_labels(runs: pl.DataFrame) -> pl.DataFrame:
    """Add ``row``: the table row a run belongs to (its seed replicates share it).

    Usually the variant name; a variant swept over an LR axis gets one row per LR
    ("baseline @ lr=3.00e-03"), and one with other axes one row per config (``group_key``).
    """
    if "row" in runs.columns or runs.is_empty():
        return runs if "row" in runs.columns else runs.with_columns(row=pl.col("variant"))
    lr = pl.col("lr") if "lr" in runs.columns else pl.lit(None, pl.Float64)
    key = pl.col("group_key") if "group_key" in runs.columns else pl.lit("")
    out = runs.with_columns(
        _nlr=lr.n_unique().over("variant"),
        _lrtxt=lr.map_elements(fmt_num, return_dtype=pl.String))
    row = pl.when(pl.col("_nlr") > 1).then(pl.format("{} @ lr={}", "variant", "_lrtxt")) \
        .otherwise(pl.col("variant"))
    out = out.with_columns(row=row)
    out = out.with_columns(_nrow=key.n_unique().over("row"))
    out = out.with_columns(row=pl.when(pl.col("_nrow") > 1)
                           .then(pl.format("{} [{}]", "row", key.str.slice(0, 6)))
                           .otherwise(pl.col("row")))
    return out.drop("_nlr", "_lrtxt", "_nrow")


def baseline_row(runs: pl.DataFrame) -> str | None:
    """The row of the baseline variant (its first run's row when it has several)."""
    base = baseline_variant(runs)
    if base is None:
        return None
    rows = add_row_labels(runs).filter(pl.col("variant") == base).sort("id")
    return str(rows["row"][0])


def baseline_variant(runs: pl.DataFrame) -> str | None:
    """The variant named 'baseline' if present, else the first ungated one (same rule as the DB)."""
    if runs.is_empty():
        return None
    variants = runs.sort("id")["variant"].to_list()
    if "baseline" in variants:
        return "baseline"
    for row in runs.sort("id").iter_rows(named=True):
        d = normalize_dims(row)
        if not d["gate_position"] and d["nonlinearity"] == "none":
            return str(row["variant"])
    return None


def variant_order(runs: pl.DataFrame, by: str = "row") -> list[str]:
    """Baseline first, then the order the sweep declared its variants (first run id)."""
    runs = add_row_labels(runs)
    firsts = runs.group_by(by).agg(pl.col("id").min(), pl.col("variant").first().alias("_v"))
    firsts = firsts.sort("id")
    base = baseline_variant(runs)
    is_base = firsts["_v"] == (base or "")
    return firsts.filter(is_base)[by].to_list() + firsts.filter(~is_base)[by].to_list()


def with_metrics(runs: pl.DataFrame, summaries: pl.DataFrame, names: Iterable[str]) -> pl.DataFrame:
    """``runs`` plus one float column per summary name (null where the run lacks it)."""
    names = list(dict.fromkeys(names))
    wide = runs
    if summaries.is_empty() or not names:
        return wide.with_columns([pl.lit(None, pl.Float64).alias(n) for n in names])
    long = summaries.filter(pl.col("name").is_in(names)).select("run_id", "name", "value")
    piv = long.pivot(on="name", index="run_id", values="value", aggregate_function="last")
    wide = wide.join(piv, left_on="id", right_on="run_id", how="left")
    missing = [n for n in names if n not in wide.columns]
    return wide.with_columns([pl.lit(None, pl.Float64).alias(n) for n in missing])


def _finite(col: str) -> pl.Expr:
    c = pl.col(col).cast(pl.Float64)
    return pl.when(c.is_finite()).then(c).otherwise(None)


def variant_stats(runs: pl.DataFrame, summaries: pl.DataFrame, metrics: Sequence[str],
                  states: Sequence[str] = RESULT_STATES, by: str = "row") -> pl.DataFrame:
    """Per row (or per variant): ``<m>:mean``, ``<m>:std``, ``<m>:n`` for each metric, the
    dims, params and ``runs`` (how many runs of the row are in ``states``).

    Missing (NULL: the DB stores NaN as NULL) and infinite values -- a diverged run's PPL -- are
    left out of the statistics.
    """
    picked = add_row_labels(runs).filter(pl.col("status").is_in(list(states)))
    wide = with_metrics(picked, summaries, metrics)
    keys = ["variant"] if by == "variant" else ["row", "variant"]
    dims = [c for c in FILTER_COLUMNS + ("params_gates", "params_total") if c in wide.columns]
    aggs: list[pl.Expr] = [pl.len().alias("runs"), pl.col("id").min().alias("_first")]
    aggs += [pl.col(c).first().alias(c) for c in dims]
    for m in metrics:
        aggs += [_finite(m).mean().alias(f"{m}:mean"), _finite(m).std().alias(f"{m}:std"),
                 _finite(m).count().alias(f"{m}:n")]
    out = wide.group_by(keys).agg(aggs).sort("_first").drop("_first")
    return out if by == "row" else out.with_columns(row=pl.col("variant"))


def add_delta(stats: pl.DataFrame, metric: str, baseline: str | None) -> pl.DataFrame:
    """``delta`` and ``delta_pct`` of ``<metric>:mean`` against the baseline row's mean.

    With an LR axis the baseline variant has one row per LR: each row is compared with the
    baseline at the same LR when there is one, else with ``baseline`` (its first row).
    """
    mean = pl.col(f"{metric}:mean")
    hit = stats.filter(pl.col("row") == baseline) if baseline is not None else stats.head(0)
    if hit.is_empty() or hit[f"{metric}:mean"][0] is None:
        none = pl.lit(None, pl.Float64)
        return stats.with_columns(delta=none, delta_pct=none)
    default = hit[f"{metric}:mean"][0]
    out = stats.with_columns(_base=pl.lit(default, pl.Float64))
    base_rows = stats.filter(pl.col("variant") == hit["variant"][0])
    if "lr" in stats.columns and base_rows.height > 1:
        per_lr = base_rows.select("lr", _lrbase=mean)
        out = out.join(per_lr, on="lr", how="left", nulls_equal=False)
        out = out.with_columns(_base=pl.coalesce("_lrbase", "_base")).drop("_lrbase")
    out = out.with_columns(delta=mean - pl.col("_base"),
                           delta_pct=(mean - pl.col("_base")) / pl.col("_base") * 100)
    return out.drop("_base")


def apply_filters(runs: pl.DataFrame, filters: Mapping[str, Sequence[Any]]) -> pl.DataFrame:
    """Keep runs whose column value is in the chosen values (an empty choice = no filter);
    '–' chooses the runs without a value (e.g. the ungated ones for gate_position)."""
    for col, values in filters.items():
        if values and col in runs.columns:
            as_text = pl.col(col).cast(pl.String).fill_null("–")
            runs = runs.filter(as_text.is_in([str(v) for v in values]))
    return runs


def leaderboard(runs: pl.DataFrame, summaries: pl.DataFrame, metric: str = VAL_PPL,
                ascending: bool = True, states: Sequence[str] = RESULT_STATES) -> pl.DataFrame:
    """Variants ranked by the seed-mean of ``metric``: rank, variant, mean, std, n, delta, dims.

    The delta is against the sweep's baseline (computed on ALL runs, so a filter that hides
    the baseline still shows deltas against it).
    """
    base = baseline_row(runs)
    stats = add_delta(variant_stats(runs, summaries, [metric], states), metric, base)
    stats = stats.rename({f"{metric}:mean": "mean", f"{metric}:std": "std", f"{metric}:n": "n"})
    ranked = stats.filter(pl.col("mean").is_not_null()).sort("mean", descending=not ascending)
    unranked = stats.filter(pl.col("mean").is_null())
    ranked = ranked.with_row_index("rank", offset=1).with_columns(pl.col("rank").cast(pl.Int64))
    out = pl.concat([ranked, unranked.with_columns(rank=pl.lit(None, pl.Int64))
                    .select(ranked.columns)], how="vertical_relaxed")
    return out.with_columns(is_baseline=pl.col("row") == (base or ""))


def fmt_num(v: float | None) -> str:
    """Table numbers: 1053 -> '1053', 5.7612 -> '5.761', 0.0031 -> '3.10e-03',
    7.1e19 -> '7.10e+19', None -> '–'."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    a = abs(v)
    if a >= 1e6:  # e.g. the word perplexity of an untrained model
        return f"{v:.2e}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 0.01 or a == 0:
        return f"{v:.3f}"
    return f"{v:.2e}"


def fmt_mean_std(mean: float | None, std: float | None) -> str:
    """'5.761 ± 0.012'; just the mean for one seed; '–' when there is no value."""
    if mean is None:
        return "–"
    if std is None or math.isnan(std):
        return fmt_num(mean)
    return f"{fmt_num(mean)} ± {fmt_num(std)}"


def fmt_delta(delta: float | None, pct: float | None) -> str:
    if delta is None:
        return "–"
    sign = "+" if delta >= 0 else ""
    text = f"{sign}{fmt_num(delta)}"
    return f"{text} ({sign}{pct:.1f}%)" if pct is not None else text


def label_columns(row: Mapping[str, Any]) -> dict[str, str]:
    """The paper's first columns for one variant row: Method, Act, Score shape."""
    return {"Method": method_label(row, str(row["variant"])), "Act": activation_label(row),
            "Score shape": score_shape(row)}


def params_label(row: Mapping[str, Any], baseline_total: int | None = None) -> str:
    """Parameters the variant adds: its gates', or, for a variant without gate parameters
    (more kv/q heads, more experts, SwitchHead), its total minus the baseline's total, as the
    paper's "Added (M)" column counts them."""
    gates = row.get("params_gates")
    total = row.get("params_total")
    if not gates and total is not None and baseline_total is not None:
        return human_count(max(int(total) - int(baseline_total), 0))
    return human_count(gates)


def baseline_params_total(runs: pl.DataFrame) -> int | None:
    """params_total of the baseline variant's first run (None when unknown)."""
    base = baseline_variant(runs)
    if base is None or "params_total" not in runs.columns:
        return None
    totals = runs.sort("id").filter(pl.col("variant") == base)["params_total"].to_list()
    return int(totals[0]) if totals and totals[0] is not None else None
