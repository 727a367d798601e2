"""Seed groups of a sweep compared with the baseline: n, mean, std, delta, CI, verdict.

A *group* is the seed replicates of one config (``group_key``: the config minus the seed),
labelled by its variant and learning rate; its statistics are over the runs in ``states``
(default: succeeded) with a finite value; its diverged runs are counted (``n_diverged``),
never averaged.

Each group is compared with ONE baseline group (the baseline variant: baseline.py): the one
at the same value of every *axis* of the sweep (``match_axes``): ``lr`` always, and every
other dimension that takes more than one value within some variant (``steps``, ``n_layer``,
... swept by ``axes``) or among the baseline's own groups. There is no fallback: when the
baseline has no group at that point (its runs there failed, were cancelled or were never
declared) the row says "no data" -- a delta taken against another learning rate's (or step
count's) baseline would mix that axis's effect into the gate's.

Percentages (``*_pct``) are relative to |baseline mean| (a negative mean keeps the bounds in
order); null when the baseline mean is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from contract.analysis_defaults import CORRECTION, FAMILY_ERROR, MIN_EFFECT
from contract.gate_dims import GATE_FIELDS
from contract.states import RunStatus, parse_status
from results_db.analysis import multiplicity, pairing
from results_db.analysis.columns import RULE, STAT_COLUMNS, STATS
from results_db.analysis.stats import seeds_needed_many, t_column
from results_db.analysis.tdist import two_sided_p
from results_db.analysis.verdict import BETTER, WORSE, verdict_expr
from results_db.schema.vocab import DIMENSIONS, GATE_DIMENSIONS, RESULT_STATES, higher_is_better

INFO = ("variant", "lr", "lr_group_key", *[d for d in DIMENSIONS if d != "lr"], "n_gates",
        "params_total", "params_gates")
_NUL = "\u0000"  # a null cell in a match key: null matches null, as in Python's ==


def _groups(runs: pl.DataFrame, info: pl.DataFrame, ok: pl.Expr) -> pl.DataFrame:
    """One row per group_key in declared order (first run id): INFO (from ``info``),
    n_diverged, and over the ``ok`` runs n, mean, std (ddof 1) of ``value``, their sorted
    seeds and whether those are distinct."""
    seed = pl.col("seed").filter(ok)
    stats = (runs.sort("run_id").group_by("group_key", maintain_order=True)
             .agg(n_diverged=(pl.col("status") == RunStatus.DIVERGED).sum().cast(pl.Int64),
                  n=ok.sum().cast(pl.Int64), mean=pl.col("value").filter(ok).mean(),
                  std=pl.col("value").filter(ok).std(), seeds=seed.sort(),
                  distinct=seed.n_unique() == ok.sum()))
    labels = info.select("group_key", *[c for c in INFO if c in info.columns])
    return labels.join(stats, on="group_key", how="right", maintain_order="right") \
        .select("group_key", *labels.columns[1:], *stats.columns[1:])


def _key(df: pl.DataFrame, cols: Sequence[str]) -> pl.Expr:
    """One string per row over ``cols`` (null-safe): rows match when all of cols are equal."""
    if not cols:
        return pl.lit("")
    return pl.concat_str([pl.col(c).cast(pl.String).fill_null(_NUL) for c in cols],
                         separator="\u001f")


def match_axes(groups: pl.DataFrame, baseline: str | None) -> list[str]:
    """The columns a comparison holds fixed (module docstring): ``lr``, then every other
    DIMENSIONS column (gate columns excepted: they are what a variant changes) with more than
    one value (null counts as a value) within some variant, and every column the baseline's
    groups take more than one value of, in DIMENSIONS order."""
    dims = [c for c in DIMENSIONS if c in groups.columns]
    if not dims or groups.height == 0:
        return ["lr"] if "lr" in groups.columns else []
    within = groups.group_by("variant").agg(pl.col(c).n_unique() for c in dims)
    most = within.select(pl.col(dims).max()).row(0, named=True)
    swept = {c for c in dims if c not in GATE_DIMENSIONS and (most[c] or 0) > 1}
    if baseline is not None:
        bases = groups.filter(pl.col("variant") == baseline)
        swept |= {c for c in dims if bases[c].n_unique() > 1}
    return [c for c in dims if c == "lr" or c in swept]


def _match(groups: pl.DataFrame, baseline: str | None) -> pl.DataFrame:
    """Adds ``is_baseline`` and ``base_key``: the baseline group each group is compared with
    -- itself for the baseline's groups; else the first (declared order) baseline group at
    the same value of every match_axes column; else null (no fallback)."""
    is_base = pl.lit(False) if baseline is None else pl.col("variant") == baseline
    groups = groups.with_columns(is_baseline=is_base)
    bases = groups.filter(pl.col("is_baseline"))
    out = groups.with_columns(base_key=pl.when(pl.col("is_baseline"))
                              .then(pl.col("group_key")))
    if bases.height == 0:
        return out
    cols = match_axes(groups, baseline)
    firsts = (bases.select(_k=_key(bases, cols), _b=pl.col("group_key"))
              .unique("_k", keep="first", maintain_order=True))
    out = out.with_columns(_k=_key(out, cols)).join(firsts, on="_k", how="left",
                                                    maintain_order="left").drop("_k")
    return out.with_columns(base_key=pl.coalesce("base_key", "_b")).drop("_b")


def _paired_diffs(values: pl.DataFrame, ok: pl.Expr, table: pl.DataFrame) -> pl.DataFrame:
    """Per paired group: mean and sd of the per-seed differences x_seed - base_seed, and what
    the pairing bought (pairing.py: pair_corr, seed_multiplier)."""
    runs = values.filter(ok).select("group_key", "seed", "value")
    pairs = table.filter(pl.col("paired")).select("group_key", "base_key")
    d = (runs.join(pairs, on="group_key")
         .join(runs.rename({"group_key": "base_key", "value": "base_value"}),
               on=["base_key", "seed"]))
    return d.group_by("group_key").agg(d_mean=(pl.col("value") - pl.col("base_value")).mean(),
                                       d_std=(pl.col("value") - pl.col("base_value")).std(),
                                       *pairing.aggs("value", "base_value"))


def _ci(t: pl.DataFrame, paired_diffs: pl.DataFrame, correction: str,
        family_error: float) -> pl.DataFrame:
    """delta, ci_low/high, ci_method, spread (the std seeds_needed reads), p_value and
    ci_level for every row: paired, Welch or none, as stats.delta_ci defines them, each CI
    at the level multiplicity.row_level gives over the rows that have one (the family)."""
    t = t.join(paired_diffs, on="group_key", how="left", maintain_order="left")
    n, bn, s, bs = pl.col("n"), pl.col("base_n"), pl.col("std"), pl.col("base_std")
    vx, vb = s ** 2 / n, bs ** 2 / bn
    se = (vx + vb).sqrt()
    has = pl.col("base_key").is_not_null() & pl.col("mean").is_not_null() \
        & pl.col("base_mean").is_not_null() & ~pl.col("is_baseline")
    welch = has & ~pl.col("paired") & (n >= 2) & (bn >= 2)
    method = (pl.when(has & pl.col("paired")).then(pl.lit("paired"))
              .when(welch).then(pl.lit("welch")).otherwise(pl.lit("none")))
    t = t.with_columns(ci_method=method, _se=se, _welch_df=pl.when(se == 0.0)
                       .then((n + bn - 2).cast(pl.Float64))
                       .otherwise((vx + vb) ** 2 / (vx ** 2 / (n - 1) + vb ** 2 / (bn - 1))))
    m = pl.col("ci_method")
    t = t.with_columns(_df=pl.when(m == "paired").then((n - 1).cast(pl.Float64))
                       .when(m == "welch").then(pl.col("_welch_df")))
    family = int(t.select(((m != "none") & ~pl.col("is_baseline")).sum()).item())
    level = multiplicity.row_level(correction, family_error, family)
    t = t.with_columns(t=t_column(t["_df"], level), ci_level=pl.when(m != "none").then(level),
                       correction=pl.lit(correction), family_error=pl.lit(family_error),
                       family=pl.lit(family, pl.Int64))
    t = t.with_columns(_se=pl.when(m == "paired")
                       .then(pl.col("d_std") / n.cast(pl.Float64).sqrt()).otherwise("_se"))
    half = (pl.when(m != "none").then(pl.when(pl.col("_se") == 0.0).then(0.0)
                                      .otherwise(pl.col("t") * pl.col("_se"))))
    delta = (pl.when(pl.col("is_baseline")).then(pl.when(pl.col("mean").is_not_null()).then(0.0))
             .when(m == "paired").then(pl.col("d_mean"))
             .when(has).then(pl.col("mean") - pl.col("base_mean")))
    spread = (pl.when(m == "paired").then(pl.col("d_std"))
              .when(m == "welch").then(((s ** 2 + bs ** 2) / 2).sqrt()))
    t = t.with_columns(delta=delta, _half=half, _spread=spread).with_columns(
        ci_low=pl.col("delta") - pl.col("_half"), ci_high=pl.col("delta") + pl.col("_half"))
    return t.with_columns(p_value=two_sided_p(t["delta"], t["_se"], t["_df"]))


def compare(runs: pl.DataFrame, info: pl.DataFrame, metric: str, baseline: str | None, *,
            states: Sequence[str] = RESULT_STATES, min_effect: float = MIN_EFFECT,
            higher: bool | None = None, correction: str = CORRECTION,
            family_error: float = FAMILY_ERROR) -> pl.DataFrame:
    """Per group (declared order): group_key, INFO, n_diverged, STAT_COLUMNS, metric,
    baseline, the RULE columns. ``runs``: one row per run (run_id, group_key, seed, status
    and a ``metric`` column) as results_db.read.frames.runs_wide returns it; ``info``: the groups'
    labels (group_key, INFO) as frames.group_info returns them. ``correction`` /
    ``family_error``: the multiplicity rule (multiplicity.py; default: each CI at 95 %). All
    groups at once (polars expressions; the t quantiles once per distinct df): stats.delta_ci
    / seeds_needed and verdict.py define the numbers, tests/results_db/test_analysis_vectorised
    .py holds this to them."""
    if not 0 < min_effect < math.inf:
        raise ValueError(f"min_effect: a relative effect > 0 (0.01 = 1 %), got {min_effect}")
    multiplicity.check(correction, family_error)
    higher = higher_is_better(metric) if higher is None else higher
    states = [parse_status(s, "states").value for s in states]
    if metric not in runs.columns:
        raise ValueError(f"compare: no column {metric!r} in the runs frame")
    values = runs.select("run_id", "group_key", "seed", "status", value=pl.col(metric))
    ok = pl.col("status").is_in(states) & pl.col("value").is_finite().fill_null(False)
    groups = _groups(values, info, ok)
    if groups.height == 0:
        return _frame(None)
    t = _match(groups.with_row_index("_row"), baseline)
    base = t.select(base_key="group_key", base_n="n", base_mean="mean", base_std="std",
                    base_seeds="seeds", base_distinct="distinct")
    t = t.join(base, on="base_key", how="left", maintain_order="left")
    paired = (~pl.col("is_baseline") & pl.col("base_key").is_not_null() & (pl.col("n") >= 2)
              & pl.col("distinct") & pl.col("base_distinct")
              & (pl.col("seeds") == pl.col("base_seeds"))).fill_null(False)
    t = t.with_columns(paired=paired)
    t = _ci(t, _paired_diffs(values, ok, t), correction, family_error)
    # arithmetic past the floats (values near 1e308) is no number: nothing shown, and no
    # verdict drawn from it ("no data")
    t = t.with_columns(pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c)
                       for c in ("mean", "base_mean", "delta", "ci_low", "ci_high"))
    t = _judge(t, higher, min_effect, correction, family_error)
    t = t.with_columns(metric=pl.lit(metric), baseline=pl.lit(baseline, pl.String))
    labels = [c for c in groups.columns if c not in ("n", "mean", "std", "seeds", "distinct")]
    return _frame(t.sort("_row").select(*labels, *STAT_COLUMNS, "metric", "baseline",
                                        "seeds_observed", *RULE))


def _judge(t: pl.DataFrame, higher: bool, min_effect: float, correction: str,
           family_error: float) -> pl.DataFrame:
    """seeds_needed (from the spread relative to |baseline mean|, at the rows' CI level),
    the ``_pct`` columns (relative to |baseline mean|, so a negative mean keeps low <= high;
    null when it is 0) and the verdict of every row (verdict.py; under Holm, better/worse
    are Holm's step-down over the rows' p-values: multiplicity.py)."""
    bmean = pl.col("base_mean")
    rel = pl.when(~pl.col("is_baseline") & (bmean != 0)).then(pl.col("_spread") / bmean.abs())
    t = t.with_columns(_rel=rel)
    level = multiplicity.row_level(correction, family_error, int(t["family"][0] or 0))
    t = t.with_columns(seeds_needed=seeds_needed_many(t["_rel"], min_effect,
                                                      t["ci_method"] == "paired", level=level))
    # the seeds that would confirm the *observed* effect (seeds_needed is for min_effect):
    # the same rule with the effect |delta / base mean| in place of min_effect
    effect = (pl.col("delta") / bmean).abs()
    obs = t.select(pl.when(effect > 0).then(pl.col("_rel") / effect)).to_series()
    t = t.with_columns(seeds_observed=pl.when(obs.is_not_null()).then(
        seeds_needed_many(obs, 1.0, t["ci_method"] == "paired", level=level)))
    pct = {f"{c}_pct": pct_of_base(pl.col(c), bmean) for c in ("delta", "ci_low", "ci_high")}
    t = t.with_columns(**pct).with_columns(
        verdict=verdict_expr(higher_is_better=higher, min_effect=min_effect))
    if correction != multiplicity.HOLM:
        return t
    tested = ~pl.col("is_baseline") & (pl.col("ci_method") != "none")
    p = t.select(pl.when(tested).then(pl.col("p_value")).otherwise(float("nan"))).to_series()
    hit = pl.Series(multiplicity.holm(p.fill_null(float("nan")).to_numpy(), family_error))
    good = pl.col("delta") > 0 if higher else pl.col("delta") < 0
    called = pl.when(good).then(pl.lit(BETTER)).otherwise(pl.lit(WORSE))
    return t.with_columns(verdict=pl.when(hit).then(called).otherwise(pl.col("verdict")))


def pct_of_base(value: pl.Expr, base_mean: pl.Expr) -> pl.Expr:
    """THE percentage rule of every ``*_pct`` value: 100 * value / |baseline mean| (a negative
    mean keeps the sign of the change and low <= high); null when the baseline mean is 0."""
    return pl.when(base_mean != 0).then(value / base_mean.abs() * 100.0)  # no 100x overflow


def seed_deltas(board: pl.DataFrame, values: pl.DataFrame) -> pl.DataFrame:
    """Each run's own change vs its row's baseline mean, in % by the rule of delta_pct
    (pct_of_base): (group_key, seed, delta_pct) for the runs in ``values`` (group_key, seed,
    value) of the non-baseline rows of ``board`` (a leaderboard: group_key, is_baseline, mean,
    delta) that have a delta; none where the baseline mean is 0. The dashboard draws them as
    the dots beside each mean and CI."""
    ref = board.filter(~pl.col("is_baseline") & pl.col("delta").is_not_null()).select(
        pl.col("group_key").cast(pl.String), base=pl.col("mean") - pl.col("delta"))
    joined = values.with_columns(pl.col("group_key").cast(pl.String)).join(ref, on="group_key")
    return joined.filter(pl.col("base") != 0).select(
        "group_key", "seed",
        delta_pct=pct_of_base(pl.col("value") - pl.col("base"), pl.col("base")))


def _frame(table: pl.DataFrame | None) -> pl.DataFrame:
    schema = {**{s.name: getattr(pl, s.dtype) for s in STATS}, "seeds_observed": pl.Int64,
              "lr": pl.Float64, "variant": pl.String, "group_key": pl.String,
              "n_diverged": pl.Int64, "metric": pl.String, "baseline": pl.String,
              "correction": pl.String, "family_error": pl.Float64, "family": pl.Int64}
    if table is None:
        return pl.DataFrame(schema={**{c: pl.String for c in INFO}, **schema})
    return table.with_columns(pl.col(c).cast(t) for c, t in schema.items())


def rank(table: pl.DataFrame, higher: bool) -> pl.Series:
    """1 = best mean (ties share the smaller rank); null where there is no mean."""
    return table["mean"].rank("min", descending=higher).cast(pl.Int64)


# A gate's own fields are null on ungated rows ("not applicable"): only their non-null values
# tell rows apart. Elsewhere null is a value (no MoE, no SwitchHead, no gate at all).
_NULL_IS_NA = tuple(f"gate_{f}" for f in GATE_FIELDS)


def varying(table: pl.DataFrame, exclude: Sequence[str] = ("lr",)) -> list[str]:
    """The DIMENSIONS columns whose value differs between rows (what tells rows apart)."""
    out = []
    for c in DIMENSIONS:
        if c not in table.columns or c in exclude:
            continue
        col = table[c].drop_nulls() if c in _NULL_IS_NA else table[c]
        if col.n_unique() > 1:
            out.append(c)
    return out


def matched_groups(values: pl.DataFrame, info: pl.DataFrame, baseline: str | None
                   ) -> pl.DataFrame:
    """The seed groups of ``values`` (run_id, group_key, seed, status, value) over the result
    states, each with is_baseline and base_key: the rows this module compares and the baseline
    group of each (sequential.py reads the same rows anytime-validly)."""
    ok = pl.col("status").is_in(list(RESULT_STATES)) & pl.col("value").is_finite() \
        .fill_null(False)
    groups = _groups(values, info, ok)
    return _match(groups, baseline) if groups.height else groups
