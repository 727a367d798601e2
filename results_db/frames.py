"""Polars builders for the ranking views: leaderboard, ablation table (downsampling lives in
downsample.py).

Grouping: a *group* is the set of seed replicates of one config (runs.group_key = the config
minus seed), labelled by its variant and lr. Statistics are over the group's succeeded runs;
its diverged runs are counted (``n_diverged``), never averaged.

Baseline of a sweep (for deltas): the variant named ``baseline`` if there is one, else the
ungated variant (no gates, no non-linearity control, no SwitchHead) with the fewest parameters
(ties: name). Each group's delta uses the baseline group at the same lr when one exists, else
the best baseline group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

if TYPE_CHECKING:
    import polars as pl

GATE_DIMS = ("gate_position", "gate_granularity", "gate_sharing", "gate_combine",
             "gate_activation", "gate_input_dependent", "n_gates", "nonlinearity", "n_head",
             "n_kv_head", "moe_experts", "switch_head", "norm_style")
GROUP_INFO = ("sweep", "variant", "lr", "group_key", "lr_group_key", *GATE_DIMS,
              "params_total", "params_gates")


def _in_list(prefix: str, values: Sequence[Any], params: dict[str, Any]) -> str:
    """Bound parameters for an IN list: ``:prefix0, :prefix1, ...``."""
    names = []
    for i, v in enumerate(values):
        params[f"{prefix}{i}"] = v
        names.append(f":{prefix}{i}")
    return ", ".join(names) or "NULL"


def run_values(engine: Engine, sweep: str | None, metrics: Sequence[str]) -> pl.DataFrame:
    """One row per finished (succeeded/diverged) run and metric: GROUP_INFO, run_id, seed,
    status, name, value (value null when the run has no such summary). Two narrow queries
    (runs, then the summaries) joined here: repeating 25 run columns per metric in SQL
    would triple the rows fetched."""
    import polars as pl

    from results_db.query import frame

    cols = ", ".join(f"r.{c}" for c in GROUP_INFO if c != "sweep")
    where = "AND w.name = :sweep" if sweep is not None else ""
    runs = frame(engine, f"""SELECT w.name AS sweep, {cols}, r.id AS run_id, r.seed AS seed,
        r.status AS status FROM runs r JOIN sweeps w ON w.id = r.sweep_id
      WHERE r.status IN ('succeeded', 'diverged') {where} ORDER BY r.id""", {"sweep": sweep})
    params: dict[str, Any] = {"sweep": sweep}
    names = _in_list("m", list(metrics), params)
    values = frame(engine, f"""SELECT s.run_id AS run_id, s.name AS name, s.value AS value
      FROM summaries s JOIN runs r ON r.id = s.run_id JOIN sweeps w ON w.id = r.sweep_id
      WHERE s.name IN ({names}) AND r.status IN ('succeeded', 'diverged') {where}""", params)
    casts = {"lr": pl.Float64, "value": pl.Float64, "params_total": pl.Int64,
             "params_gates": pl.Int64, "n_gates": pl.Int64, "gate_input_dependent": pl.Boolean,
             "run_id": pl.Int64,
             **{c: pl.String for c in ("variant", "nonlinearity", "switch_head", "norm_style",
                                       "gate_position", "gate_granularity", "gate_sharing",
                                       "gate_combine", "gate_activation", "name", "status",
                                       "sweep", "group_key", "lr_group_key")}}

    def typed(df: pl.DataFrame) -> pl.DataFrame:
        return df.with_columns(pl.col(c).cast(t) for c, t in casts.items() if c in df.columns)

    present = typed(values).select("name").unique()
    grid = typed(runs).join(present, how="cross")  # every finished run x every logged metric
    return grid.join(typed(values), on=["run_id", "name"], how="left").sort("run_id", "name")


def group_stats(values: pl.DataFrame) -> pl.DataFrame:
    """Per (group, metric name): mean, std (sample), n over succeeded runs; n_diverged."""
    import polars as pl

    ok = (pl.col("status") == "succeeded") & pl.col("value").is_not_null() & \
        pl.col("value").is_finite()
    info = [c for c in GROUP_INFO if c not in ("sweep", "group_key")]
    return (values.group_by("sweep", "group_key", "name", maintain_order=True)
            .agg(*[pl.col(c).first() for c in info],
                 mean=pl.col("value").filter(ok).mean(),
                 std=pl.col("value").filter(ok).std(ddof=1),
                 n=ok.sum().cast(pl.Int64),
                 n_diverged=pl.col("run_id").filter(pl.col("status") == "diverged")
                 .n_unique().cast(pl.Int64)))


def _is_baseline_variant(groups: pl.DataFrame) -> pl.Series:
    """True for the rows of the sweep's baseline variant (module docstring)."""
    import polars as pl

    named = groups["variant"] == "baseline"
    if named.any():
        return named
    ungated = groups.filter((pl.col("n_gates").fill_null(0) == 0) &
                            pl.col("nonlinearity").fill_null("none").is_in(["none"]) &
                            pl.col("switch_head").is_null())
    if ungated.height == 0:
        return pl.Series([False] * groups.height)
    pick = ungated.sort(pl.col("params_total").fill_null(0), "variant").row(0, named=True)
    return groups["variant"] == pick["variant"]


def with_delta(groups: pl.DataFrame, ascending: bool = True) -> pl.DataFrame:
    """Add baseline, delta, delta_pct per (sweep, metric name) -- see the module docstring."""
    import polars as pl

    parts = []
    for (sweep_name, name), g in groups.group_by("sweep", "name", maintain_order=True):
        g = g.with_columns(is_baseline=_is_baseline_variant(g))
        base = g.filter(pl.col("is_baseline") & pl.col("mean").is_not_null())
        best = (base["mean"].min() if ascending else base["mean"].max()) if base.height else None
        same_lr = base.group_by("lr").agg(base_mean=pl.col("mean").first())
        g = g.join(same_lr, on="lr", how="left", nulls_equal=True).with_columns(
            base_mean=pl.col("base_mean").fill_null(pl.lit(best, dtype=pl.Float64)),
            baseline=pl.lit(base["variant"][0] if base.height else None, dtype=pl.String))
        parts.append(g)
    if not parts:
        return groups.with_columns(is_baseline=pl.lit(False), base_mean=pl.lit(None, pl.Float64),
                                   baseline=pl.lit(None, pl.String), delta=pl.lit(None, pl.Float64),
                                   delta_pct=pl.lit(None, pl.Float64))
    out = pl.concat(parts, how="diagonal_relaxed")
    return out.with_columns(delta=pl.col("mean") - pl.col("base_mean"),
                            delta_pct=100 * (pl.col("mean") - pl.col("base_mean")) /
                            pl.col("base_mean"))


def leaderboard(engine: Engine, sweep: str | None, metric: str = "val/ppl",
                ascending: bool = True) -> pl.DataFrame:
    """Per (sweep, group): mean, std, n, n_diverged, delta/delta_pct vs baseline, rank."""
    import polars as pl

    stats = with_delta(group_stats(run_values(engine, sweep, [metric])), ascending)
    if stats.height == 0:
        return stats
    order = pl.col("mean").rank("min", descending=not ascending).over("sweep")
    cols = ["sweep", "rank", "variant", "lr", "mean", "std", "n", "n_diverged", "delta",
            "delta_pct", "baseline", "is_baseline", *GATE_DIMS, "params_total", "params_gates",
            "group_key", "lr_group_key"]
    return (stats.with_columns(rank=order.cast(pl.Int64), metric=pl.lit(metric))
            .select(*cols, "metric")
            .sort("sweep", pl.col("rank"), "variant", nulls_last=True))


def ablation_table(engine: Engine, sweep: str, metrics: Sequence[str]) -> pl.DataFrame:
    """One row per group of the sweep: gate dims, n, and per metric ``<m>:mean``, ``<m>:std``,
    ``<m>:delta`` (vs baseline, lower-is-better agnostic) and ``<m>:text`` ("12.30 ± 0.41").
    With an LR axis (a group with several lrs), ``max_stable_lr`` of the group's LR ladder."""
    import polars as pl

    stats = with_delta(group_stats(run_values(engine, sweep, metrics)))
    keys = ["group_key", "variant", "lr", "lr_group_key", *GATE_DIMS, "params_total",
            "params_gates"]
    if stats.height == 0:
        return pl.DataFrame({k: [] for k in [*keys, "n", "n_diverged", "is_baseline"]})
    table = (stats.group_by(keys, maintain_order=True)
             .agg(n=pl.col("n").max(), n_diverged=pl.col("n_diverged").max(),
                  is_baseline=pl.col("is_baseline").any()))
    for m in metrics:
        part = stats.filter(pl.col("name") == m).select(
            "group_key", pl.col("mean").alias(f"{m}:mean"), pl.col("std").alias(f"{m}:std"),
            pl.col("delta").alias(f"{m}:delta"))
        table = table.join(part, on="group_key", how="left")
        table = table.with_columns(pl.struct(f"{m}:mean", f"{m}:std").map_elements(
            lambda s, m=m: _pm(s[f"{m}:mean"], s[f"{m}:std"]), return_dtype=pl.String)
            .alias(f"{m}:text"))
    lrs_per_ladder = table.group_by("lr_group_key").agg(pl.col("lr").n_unique())["lr"]
    if lrs_per_ladder.max() > 1:  # an LR axis
        from results_db.derive import max_stable_lr

        msl = max_stable_lr(engine, sweep).select("lr_group_key", "max_stable_lr")
        table = table.join(msl, on="lr_group_key", how="left")
    return table.sort(pl.col("is_baseline").not_(), "variant", "lr")


def _pm(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "—"
    if std is None:
        return f"{mean:.4g}"
    return f"{mean:.4g} ± {std:.2g}"
