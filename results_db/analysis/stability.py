"""Learning-rate stability as the paper measures it (Table 2) and as the runs show it.

A *ladder* is the runs of one config at several learning rates (``lr_group_key``: the config
minus seed, ``train.lr`` and ``train.min_lr``), labelled by its variant. Per (ladder, lr):

- ``n`` finished runs; ``mean``/``std``/CI of the final ``metric`` (default val/loss) over the
  seeds that neither diverged nor ended non-finite;
- ``diverged``: how many seeds diverged (run status ``diverged``, a ``stability/diverged``
  summary > 0, or a NaN/inf final value); ``loss_spikes``: ``stability/loss_spikes`` summed
  over seeds; ``max_activation``: the largest ``probe/max_activation`` over seeds;
- ``rel_to_best`` = mean / best - 1, where ``best`` is the ladder's lowest mean over the LRs
  where no seed diverged;
- ``degraded``: did not diverge but ``mean > best * (1 + tol)`` -- the run that trained badly
  without a spike (tol default 0.05 = 5 %, configurable);
- ``stable`` = no seed diverged and not degraded.

**max_stable_lr** = the largest LR reached from the ladder's best LR upwards through stable
LRs only (every tested LR from the best up to it is stable): a stable LR above an unstable
one is luck, not stability. Ties in max_stable_lr are told apart by ``rel_at_top_lr`` (the
degradation at the largest LR tried; a diverged top LR counts as infinitely degraded): the
summary lists the most stable ladder first.

Uncertainty: a max stable LR from means alone says nothing about seeds, so

- **per seed**: the same rule on each seed's own values (its best LR, its degradation, its
  divergence): ``per_seed`` has one row per (ladder, seed), and the summary says how many
  seeds reach the mean-based max stable LR (``seeds_agree`` of ``n_seeds``) and their range
  (``seed_msl_min``/``seed_msl_max``; ``seed_msls`` in words);
- **per LR, vs the baseline**: the paired change of the ladder vs the baseline at the same LR
  with its 95 % CI and verdict -- the leaderboard's numbers (compare.py), put on the curve
  (``delta_pct``, ``ci_low_pct``, ``ci_high_pct``, ``ci_method``, ``verdict``);
- **labels**: ``label`` names a ladder by its variant, plus the dimensions that tell two
  ladders of one variant apart (never the ``lr_group_key`` hash);
- **the sentence** (``Stability.sentence``): "sdpa_elementwise stays within 5 % of its best
  val/loss up to 3e-2 (3 of 3 seeds agree), the baseline up to 1e-2 (3 of 3 seeds agree).
  At 3e-2, where the baseline has degraded, the change in val/loss vs the baseline (95 %
  CI): sdpa_elementwise -20.1 % [-25.3, -14.9] (paired, better)."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from contract.analysis_defaults import STABILITY_METRIC, STABILITY_TOL
from contract.metrics import DIVERGED, LOSS_SPIKES, MAX_ACTIVATION
from contract.states import RunStatus as S
from results_db.analysis.labels import DIVERGED_SEEDS, lr_text
from results_db.analysis.stats import t_column
from results_db.schema.vocab import DIMENSIONS, RESULT_STATES, higher_is_better

EXTRA_METRICS = (DIVERGED, LOSS_SPIKES, MAX_ACTIVATION)
# The curve's count of the seeds that diverged at an LR: the column is named by the state.


@dataclass(frozen=True)
class Stability:
    curve: pl.DataFrame  # per (ladder, lr): see the module docstring
    summary: pl.DataFrame  # per ladder: variant, best_lr, best_value, max_stable_lr, n_lrs...
    rule: str  # the rule and tolerance in one sentence
    per_seed: pl.DataFrame | None = None  # per (ladder, seed): the rule on one seed's values
    sentence: str = ""  # the outcome in words: seed agreement, the change vs the baseline


def rule_text(metric: str, tol: float) -> str:
    return (f"An LR is stable when no seed diverged and its mean final {metric} is within "
            f"{tol:.0%} of the variant's best LR (mean <= best x {1 + tol:g}); max stable LR "
            f"is the largest LR reached from the best LR upwards through stable LRs only; "
            f"ties are ordered by the degradation at the largest LR tried.")


def _points(runs: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Per (ladder, lr), ladders in order of their first run, LRs ascending: n, mean, std,
    CI over the seeds that neither diverged nor ended non-finite, diverged, loss_spikes
    (sum of the finite counts; null without any), max_activation (largest finite)."""
    flag = pl.col(DIVERGED).fill_null(0.0).fill_nan(0.0) > 0  # NaN flag: not a flag
    bad = (pl.col("status") == S.DIVERGED) | flag | ~pl.col(metric).is_finite().fill_null(False)
    ok = ~bad & pl.col("status").is_in(list(RESULT_STATES))
    spikes = pl.col(LOSS_SPIKES).filter(pl.col(LOSS_SPIKES).is_finite().fill_null(False))
    acts = pl.col(MAX_ACTIVATION).filter(pl.col(MAX_ACTIVATION).is_finite().fill_null(False))
    r = runs.filter(pl.col("lr").is_not_null()).sort("run_id")
    names = r.group_by("lr_group_key", maintain_order=True).agg(
        variant=pl.col("variant").unique(maintain_order=True).str.join(","))
    names = names.with_row_index("_ladder")
    pts = r.group_by("lr_group_key", "lr").agg(
        n=pl.len().cast(pl.Int64), _k=ok.sum().cast(pl.Int64),
        mean=pl.col(metric).filter(ok).mean(), std=pl.col(metric).filter(ok).std(),
        diverged=bad.sum().cast(pl.Int64),
        loss_spikes=pl.when(spikes.count() > 0).then(spikes.sum()),
        max_activation=acts.max())
    pts = pts.join(names, on="lr_group_key").sort("_ladder", "lr")
    k = pl.col("_k")
    pts = pts.with_columns(_t=t_column(pts.select(pl.when(k >= 2).then(k - 1)).to_series()))
    half = pl.col("_t") * pl.col("std") / pl.col("_k").cast(pl.Float64).sqrt()
    return pts.with_columns(ci_low=pl.col("mean") - half, ci_high=pl.col("mean") + half)


def _ladders(pts: pl.DataFrame, tol: float) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Marks rel_to_best/degraded/stable on every point and summarises every ladder (module
    docstring) with window expressions over the ladder (points sorted by lr)."""
    lad = "lr_group_key"
    mean, div, lr = pl.col("mean"), pl.col(DIVERGED_SEEDS), pl.col("lr")
    okp = (div == 0) & mean.is_not_null()
    pts = pts.with_columns(_i=pl.int_range(pl.len()).over(lad),
                           _best=mean.filter(okp).min().over(lad))
    # the first (lowest-lr) point at the best mean: Python's min() over the sorted ladder
    best_i = pl.col("_i").filter(okp & (mean == pl.col("_best"))).min().over(lad)
    rel = pl.when(pl.col("_best").is_not_null() & (pl.col("_best") != 0))\
        .then(mean / pl.col("_best") - 1)
    pts = pts.with_columns(_bi=best_i, rel_to_best=rel).with_columns(
        degraded=((div == 0) & pl.col("rel_to_best").is_not_null()
                  & (pl.col("rel_to_best") > tol)),
        stable=((div == 0) & pl.col("rel_to_best").is_not_null()
                & (pl.col("rel_to_best") <= tol)))
    after = pl.col("_i") >= pl.col("_bi")
    stop = pl.col("_i").filter(after & ~pl.col("stable")).min().over(lad)  # first failure
    pts = pts.with_columns(_run=after & (stop.is_null() | (pl.col("_i") < stop)))
    msl = lr.filter(pl.col("_run")).max()
    summary = pts.group_by(lad, maintain_order=True).agg(
        variant=pl.col("variant").first(), best_lr=lr.filter(pl.col("_i") == pl.col("_bi"))
        .first(), best_value=pl.col("_best").first(), max_stable_lr=msl,
        n_lrs=pl.len().cast(pl.Int64), lrs=lr, min_diverged_lr=lr.filter(div > 0).min(),
        value_at_max=mean.filter(lr == msl).first(), top_lr=lr.last(),
        rel_at_top_lr=pl.when(div.last() > 0).then(float("inf"))
        .otherwise(pl.col("rel_to_best").last()))
    return pts, summary


def _seed_points(runs: pl.DataFrame, metric: str) -> pl.DataFrame:
    """Per (ladder, seed, lr): the seed's own value as a one-run point (``mean``; null when it
    diverged or ended non-finite, then ``diverged`` 1), keyed ``lr_group_key`` = the ladder's
    key + the seed, so that _ladders applies the rule to each seed's own ladder; ``ladder``
    and ``seed`` say which."""
    flag = pl.col(DIVERGED).fill_null(0.0).fill_nan(0.0) > 0
    bad = (pl.col("status") == S.DIVERGED) | flag | ~pl.col(metric).is_finite().fill_null(False)
    ok = ~bad & pl.col("status").is_in(list(RESULT_STATES))
    r = runs.filter(pl.col("lr").is_not_null() & pl.col("seed").is_not_null()).sort("run_id")
    pts = r.group_by("lr_group_key", "seed", "lr", maintain_order=True).agg(
        variant=pl.col("variant").first(), mean=pl.col(metric).filter(ok).mean(),
        diverged=bad.sum().cast(pl.Int64), _any=(ok | bad).any())
    pts = pts.filter(pl.col("_any")).drop("_any")
    order = pts.select("lr_group_key", "seed").unique(maintain_order=True).with_row_index(
        "_ladder")
    return (pts.join(order, on=["lr_group_key", "seed"]).sort("_ladder", "lr")
            .with_columns(ladder=pl.col("lr_group_key"),
                          lr_group_key=pl.col("lr_group_key") + pl.lit(_SEP)
                          + pl.col("seed").cast(pl.String)))


_SEP = "\u001f"


def _per_seed(runs: pl.DataFrame, metric: str, tol: float) -> pl.DataFrame:
    """One row per (ladder, seed) that ran at >= 2 learning rates: lr_group_key, variant,
    seed, best_lr, max_stable_lr, n_lrs (module docstring)."""
    pts = _seed_points(runs, metric)
    if pts.is_empty():
        return pl.DataFrame(schema={c: t for c, t in _dtypes(_PER_SEED).items()
                                    if c != "label"})
    keys = pts.select(key="lr_group_key", ladder="ladder", seed="seed").unique()
    _, summary = _ladders(pts.drop("ladder", "seed"), tol)
    summary = summary.join(keys, left_on="lr_group_key", right_on="key",
                           maintain_order="left")
    return summary.filter(pl.col("n_lrs") > 1).select(
        lr_group_key=pl.col("ladder"), variant="variant", seed=pl.col("seed").cast(pl.Int64),
        best_lr="best_lr", max_stable_lr="max_stable_lr", n_lrs="n_lrs")


def _agreement(summary: pl.DataFrame, per_seed: pl.DataFrame) -> pl.DataFrame:
    """n_seeds, seeds_agree (seeds whose own max stable LR is the ladder's), the range of the
    seeds' max stable LRs and ``seed_msls`` in words ("s0 1e-2, s1 3e-2"), per summary row."""
    ps = per_seed.join(summary.select("lr_group_key", _msl="max_stable_lr"),
                       on="lr_group_key", how="left")
    same = pl.col("max_stable_lr").eq_missing(pl.col("_msl"))
    agg = ps.sort("seed").group_by("lr_group_key").agg(
        n_seeds=pl.len().cast(pl.Int64), seeds_agree=same.sum().cast(pl.Int64),
        seed_msl_min=pl.col("max_stable_lr").min(), seed_msl_max=pl.col("max_stable_lr").max(),
        _seeds=pl.col("seed"), _msls=pl.col("max_stable_lr"))
    text = [", ".join(f"s{s} {lr_text(m)}" for s, m in zip(ss, ms, strict=True))
            for ss, ms in zip(agg["_seeds"].to_list(), agg["_msls"].to_list(), strict=True)]
    agg = agg.with_columns(pl.Series("seed_msls", text, dtype=pl.String)).drop("_seeds",
                                                                                "_msls")
    out = summary.join(agg, on="lr_group_key", how="left", maintain_order="left")
    return out.with_columns(pl.col("n_seeds").fill_null(0), pl.col("seeds_agree").fill_null(0))


def ladder_labels(ladders: pl.DataFrame, info: pl.DataFrame | None) -> pl.DataFrame:
    """(lr_group_key, label) per ladder: the variant's name, plus ``dim=value`` for the
    dimensions (from ``info``: one row per seed group with lr_group_key and the DIMENSIONS
    columns, frames.group_info) that differ between two ladders of the same variant."""
    base = ladders.select("lr_group_key", "variant").unique("lr_group_key",
                                                            maintain_order=True)
    if info is None or "lr_group_key" not in info.columns or base.is_empty():
        return base.select("lr_group_key", label=pl.col("variant"))
    dims = [c for c in DIMENSIONS if c in info.columns and c != "lr"]
    first = info.unique("lr_group_key", keep="first", maintain_order=True)
    rows = base.join(first.select("lr_group_key", *dims), on="lr_group_key", how="left",
                     maintain_order="left")
    labels = []
    for r in rows.iter_rows(named=True):
        same = rows.filter(pl.col("variant") == r["variant"])
        differ = [d for d in dims if same.height > 1 and same[d].n_unique() > 1]
        extra = ", ".join(f"{d}={r[d]}" for d in differ)
        labels.append(f"{r['variant']} ({extra})" if extra else str(r["variant"]))
    return rows.select("lr_group_key").with_columns(pl.Series("label", labels,
                                                              dtype=pl.String))


_VS = ("delta_pct", "ci_low_pct", "ci_high_pct", "ci_method", "verdict", "is_baseline")


def _vs_baseline(curve: pl.DataFrame, table: pl.DataFrame | None) -> pl.DataFrame:
    """The leaderboard's change vs the baseline at the same LR on every curve point (nulls
    without a ``table``)."""
    if table is None or "lr_group_key" not in table.columns:
        return curve.with_columns(
            *(pl.lit(None, pl.Float64).alias(c) for c in _VS[:3]),
            pl.lit(None, pl.String).alias("ci_method"), pl.lit(None, pl.String).alias("verdict"),
            pl.lit(None, pl.Boolean).alias("is_baseline"))
    vs = table.select("lr_group_key", "lr", *_VS).unique(["lr_group_key", "lr"], keep="first",
                                                          maintain_order=True)
    return curve.join(vs, on=["lr_group_key", "lr"], how="left", maintain_order="left")


def analyse(runs: pl.DataFrame, metric: str = STABILITY_METRIC, tol: float = STABILITY_TOL, *,
            info: pl.DataFrame | None = None, table: pl.DataFrame | None = None,
            baseline: str | None = None) -> Stability:
    """``runs``: one row per finished run with variant, lr, lr_group_key, run_id, status
    (and ``seed``, for the per-seed rule) and one column per metric in (metric,
    *EXTRA_METRICS) (null where not logged). ``info``: the seed groups' labels
    (frames.group_info), for the ladders' labels; ``table``: compare.compare() on ``metric``,
    for the change vs the baseline at each LR; ``baseline``: its variant, for the sentence.
    Every ladder at once (polars; the t quantiles once per distinct seed count)."""
    if not 0 <= tol < 10:
        raise ValueError(f"stability: tol is a relative fraction (0.05 = 5 %), got {tol}")
    if higher_is_better(metric):
        raise ValueError(f"stability: {metric!r} is higher-is-better; the LR rule needs a "
                         f"loss-like metric (val/loss, val/ppl)")
    runs = runs.with_columns(pl.col(c).cast(pl.Float64) for c in (metric, *EXTRA_METRICS))
    curve, summary = _ladders(_points(runs, metric), tol)
    labels = ladder_labels(summary, info)
    if "seed" in runs.columns:
        per_seed = _per_seed(runs, metric, tol)
    else:
        per_seed = pl.DataFrame(schema={c: t for c, t in _dtypes(_PER_SEED).items()
                                        if c != "label"})
    per_seed = per_seed.join(labels, on="lr_group_key", how="left", maintain_order="left")
    summary = _agreement(summary.join(labels, on="lr_group_key", how="left",
                                      maintain_order="left"), per_seed)
    curve = _vs_baseline(curve.join(labels, on="lr_group_key", how="left",
                                    maintain_order="left"), table)
    st = Stability(_curve_frame(curve), _summary_frame(summary), rule_text(metric, tol),
                   _frame(per_seed, _PER_SEED))
    return Stability(st.curve, st.summary, st.rule, st.per_seed,
                     stability_sentence(st, metric, tol, baseline))


def _name(r: dict[str, Any], baseline: str | None) -> str:
    if r["variant"] != baseline:
        return str(r["label"])
    return "the baseline" if baseline == "baseline" else f"the baseline '{r['label']}'"


def stability_sentence(st: Stability, metric: str, tol: float, baseline: str | None) -> str:
    """The summary in words: each ladder's max stable LR with its seeds' agreement (most
    stable first, the baseline last), then, at the lowest LR above the baseline's max stable
    LR, each ladder's change vs the baseline there with its CI. Empty without a ladder."""
    s = st.summary.filter(st.summary["n_lrs"] > 1)
    if s.is_empty():
        return ""
    rows = sorted(s.iter_rows(named=True), key=lambda r: r["variant"] == baseline)
    parts = []
    for i, r in enumerate(rows):
        seeds = ""
        if r["n_seeds"]:
            seeds = f" ({r['seeds_agree']} of {r['n_seeds']} seeds agree"
            seeds += ")" if r["seeds_agree"] == r["n_seeds"] else f": {r['seed_msls']})"
        verb = f" stays within {tol * 100:g} % of its best {metric}" if i == 0 else ""
        if r["max_stable_lr"] is None:
            parts.append(f"{_name(r, baseline)} has no stable LR (it diverged wherever it "
                         f"ran){seeds}")
        else:
            parts.append(f"{_name(r, baseline)}{verb} up to {lr_text(r['max_stable_lr'])}"
                         f"{seeds}")
    return ", ".join(parts) + "." + _at_baseline_limit(st, metric, baseline)


def _at_baseline_limit(st: Stability, metric: str, baseline: str | None) -> str:
    """" At 3e-2, where the baseline has degraded, the change in val/loss vs the baseline
    (95 % CI): sdpa_elementwise -20.1 % [-25.3, -14.9] (paired, better)." -- at the lowest
    LR above the baseline's max stable LR, for the ladders with a change there."""
    if baseline is None:
        return ""
    bases = st.summary.filter((pl.col("variant") == baseline) & (pl.col("n_lrs") > 1))
    if bases.is_empty() or bases["max_stable_lr"][0] is None:
        return ""
    limit, key = bases["max_stable_lr"][0], bases["lr_group_key"][0]
    above = st.curve.filter((pl.col("lr_group_key") == key) & (pl.col("lr") > limit))
    if above.is_empty():
        return ""
    at = float(above["lr"].min())  # type: ignore[arg-type]
    pts = st.curve.filter((pl.col("lr") == at) & (pl.col("variant") != baseline)
                          & pl.col("delta_pct").is_not_null())
    if pts.is_empty():
        return ""
    what = S.DIVERGED.value if above.filter(pl.col("lr") == at)[DIVERGED_SEEDS][0] \
        else "degraded"
    items = []
    for r in pts.iter_rows(named=True):
        ci = ("" if r["ci_low_pct"] is None else
              f" [{r['ci_low_pct']:+.1f}, {r['ci_high_pct']:+.1f}]")
        items.append(f"{r['label']} {r['delta_pct']:+.1f} %{ci} ({r['ci_method']}, "
                     f"{r['verdict']})")
    return (f" At {lr_text(at)}, where the baseline has {what}, the change in {metric} vs "
            f"the baseline (95 % CI): " + "; ".join(items) + ".")


_CURVE = {"lr_group_key": "String", "variant": "String", "lr": "Float64", "n": "Int64",
          "mean": "Float64", "std": "Float64", "ci_low": "Float64", "ci_high": "Float64",
          "rel_to_best": "Float64", "max_activation": "Float64", "loss_spikes": "Float64",
          DIVERGED_SEEDS: "Int64", "degraded": "Boolean", "stable": "Boolean", "label": "String",
          "is_baseline": "Boolean", "delta_pct": "Float64", "ci_low_pct": "Float64",
          "ci_high_pct": "Float64", "ci_method": "String", "verdict": "String"}
_SUMMARY = {"lr_group_key": "String", "variant": "String", "best_lr": "Float64",
            "best_value": "Float64", "max_stable_lr": "Float64", "n_lrs": "Int64",
            "lrs": "List(Float64)", "min_diverged_lr": "Float64", "value_at_max": "Float64",
            "top_lr": "Float64", "rel_at_top_lr": "Float64", "label": "String",
            "n_seeds": "Int64", "seeds_agree": "Int64", "seed_msl_min": "Float64",
            "seed_msl_max": "Float64", "seed_msls": "String"}
_PER_SEED = {"lr_group_key": "String", "variant": "String", "seed": "Int64",
             "best_lr": "Float64", "max_stable_lr": "Float64", "n_lrs": "Int64",
             "label": "String"}


def _dtype(name: str) -> Any:
    return pl.List(pl.Float64) if name == "List(Float64)" else getattr(pl, name)


def _dtypes(spec: dict[str, str]) -> dict[Any, Any]:
    return {c: _dtype(t) for c, t in spec.items()}


def _frame(df: pl.DataFrame, spec: dict[str, str]) -> pl.DataFrame:
    schema = _dtypes(spec)
    if df.is_empty():
        return pl.DataFrame(schema=schema)
    return df.select(list(schema)).cast(schema)


def _curve_frame(points: pl.DataFrame) -> pl.DataFrame:
    schema: dict[Any, Any] = {c: _dtype(t) for c, t in _CURVE.items()}
    return points.select(list(schema)).cast(schema)


def _summary_frame(summary: pl.DataFrame) -> pl.DataFrame:
    schema: dict[Any, Any] = {c: _dtype(t) for c, t in _SUMMARY.items()}
    df = summary.select(list(schema)).cast(schema)
    return df.sort(pl.col("max_stable_lr"), pl.col("rel_at_top_lr"), "variant",
                   descending=[True, False, False], nulls_last=True)
