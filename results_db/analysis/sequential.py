"""The rows of a sweep that adds seeds until it decides (``decide:``), read anytime-validly.

Per non-baseline seed group (a *row*: one variant at one point of the sweep's axes, as
compare.py defines rows and their baseline group), the per-seed paired differences
d_s = x_s - b_s over the seeds both sides finished (relative: (x_s - b_s) / |b_s|, when the
margin is relative), in seed order, are read with the confidence sequence of confseq.py at
level 1 - alpha / R (Bonferroni over the R rows that have a baseline: every row shares the
baseline's seeds, and Bonferroni needs no independence). A verdict read off it stays valid
whatever the seed allocation did after looking, and it never flips back (the interval is
intersected over looks). ``rule="holm"`` (the final report) decides better/worse by Holm's
step-down over the rows' anytime p-values instead, which is valid on any valid p-values and
never calls fewer rows than Bonferroni; "within noise" is still read off the Bonferroni
interval.

Diverged runs are an outcome, not a missing seed: they are counted (``n_diverged``) and their
seeds are never run again, but they carry no finite value to difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from contract.states import DONE_OK
from results_db.analysis import confseq, multiplicity, pairing
from results_db.analysis.compare import matched_groups
from results_db.schema.vocab import NEEDS_SEEDS, RESULT_STATES

if TYPE_CHECKING:
    import polars as pl

RULES = (multiplicity.BONFERRONI, multiplicity.HOLM)  # multiplicity.py owns both
_UNPAIRED = pairing.Pairing(None, None)  # a row with no seed finished on both sides


@dataclass(frozen=True)
class DecideRule:
    """What a ``decide:`` block asks of the analysis (orchestrator/sweep/spec.py parses it)."""

    metric: str
    margin: float  # "within noise" half-width, in the metric's units or relative
    relative: bool  # margin (and the differences) relative to the baseline's per-seed value
    error_rate: float  # family-wise, over the sweep's rows
    max_seeds: int  # a row that reaches it undecided is inconclusive
    higher_is_better: bool
    g: float = confseq.MIXTURE_G


def _pairs(values: pl.DataFrame, table: pl.DataFrame, relative: bool) -> pl.DataFrame:
    """(group_key, seed, d, value, base) for every seed both a row and its baseline group
    finished."""
    import polars as pl

    ok = values.filter(pl.col("value").is_finite().fill_null(False)
                       & pl.col("status").is_in(list(RESULT_STATES)))
    runs = ok.select("group_key", "seed", "value")
    rows = table.filter(~pl.col("is_baseline") & pl.col("base_key").is_not_null())
    d = (runs.join(rows.select("group_key", "base_key"), on="group_key")
         .join(runs.rename({"group_key": "base_key", "value": "base"}), on=["base_key", "seed"]))
    diff = pl.col("value") - pl.col("base")
    if relative:
        d = d.filter(pl.col("base") != 0)
        diff = diff / pl.col("base").abs()
    return d.select("group_key", "seed", "value", "base", d=diff).sort("group_key", "seed")


def read_rows(values: pl.DataFrame, info: pl.DataFrame, baseline: str | None,
              rule: DecideRule, method: str = "bonferroni") -> pl.DataFrame:
    """One row per non-baseline group with a baseline: variant, lr, group_key, base_key, n
    (paired seeds), n_diverged, seeds (all seeds the row has a finished run for), mean, low,
    high (of the difference; relative ones as fractions), p_value, pair_corr and
    seed_multiplier (what pairing the seeds bought: pairing.py, over the raw values), verdict,
    more_seeds (about how many more paired seeds would decide it if the spread stays; null when
    the cap would not), family (R), level (1 - alpha / R). ``values``: (run_id, group_key,
    seed, status, value) of the sweep's runs; ``info``: frames.group_info."""
    import polars as pl

    if method not in RULES:
        raise ValueError(f"rule: expected one of {RULES}, got {method!r}")
    table = matched_groups(values, info, baseline)
    if table.height == 0 or "is_baseline" not in table.columns:
        return pl.DataFrame()
    rows = table.filter(~pl.col("is_baseline") & pl.col("base_key").is_not_null())
    family = max(rows.height, 1)
    alpha_row = rule.error_rate / family
    pairs = _pairs(values, table, rule.relative)
    by_row = {k: grp["d"].to_numpy() for (k,), grp in pairs.group_by("group_key")}
    paired = {k: pairing.pairing(grp["value"].to_list(), grp["base"].to_list())
              for (k,), grp in pairs.group_by("group_key")}
    done = (values.filter(pl.col("status").is_in([s.value for s in DONE_OK]))
            .group_by("group_key").agg(pl.col("seed").unique().sort().alias("done")))
    done_by = dict(zip(done["group_key"].to_list(), done["done"].to_list(), strict=True))
    out = []
    for r in rows.iter_rows(named=True):
        d = by_row.get(r["group_key"], np.array([]))
        reading = confseq.read(d, alpha_row, rule.g)
        out.append({**{k: r.get(k) for k in ("variant", "lr", "group_key", "base_key")},
                    "n": reading.n, "n_diverged": r["n_diverged"],
                    "seeds": done_by.get(r["group_key"], []),
                    "mean": reading.mean if reading.n else None, "sd": reading.sd,
                    "low": reading.low, "high": reading.high, "p_value": reading.p_value,
                    "pair_corr": paired.get(r["group_key"], _UNPAIRED).corr,
                    "seed_multiplier": paired.get(r["group_key"], _UNPAIRED).multiplier})
    frame = pl.DataFrame(out, infer_schema_length=None)
    low, high = frame["low"].to_numpy(), frame["high"].to_numpy()
    ran = np.array([len(s) for s in frame["seeds"].to_list()])
    verdict = confseq.verdicts(low, high, rule.margin, rule.higher_is_better,
                               at_cap=ran >= rule.max_seeds)
    if method == "holm":
        mean = frame["mean"].fill_null(0.0).to_numpy()
        hit = multiplicity.holm(frame["p_value"].to_numpy(), rule.error_rate)
        good = mean > 0 if rule.higher_is_better else mean < 0
        verdict = np.where(hit, np.where(good, confseq.BETTER, confseq.WORSE), verdict)
    more = [_more(m, s, n, rule, alpha_row) if v in (confseq.UNDECIDED,) else None
            for m, s, n, v in zip(frame["mean"], frame["sd"], frame["n"], verdict,
                                  strict=True)]
    return frame.with_columns(verdict=pl.Series(verdict.tolist(), dtype=pl.String),
                              more_seeds=pl.Series(more, dtype=pl.Int64),
                              family=pl.lit(family), level=pl.lit(1.0 - alpha_row),
                              rule=pl.lit(method))


def _more(mean: float | None, sd: float | None, n: int, rule: DecideRule, alpha: float
          ) -> int | None:
    """About how many more paired seeds until the interval is narrow enough to decide, if the
    mean and spread stay: narrower than |mean| (excludes 0) or than margin - |mean| (inside the
    margin), whichever needs fewer."""
    if mean is None or sd is None or not math.isfinite(sd):
        return None
    target = max(abs(mean), rule.margin - abs(mean))
    n_at = confseq.seeds_to_width(sd, target, alpha, n + 1, rule.max_seeds, rule.g)
    return None if n_at is None else n_at - n


@dataclass(frozen=True)
class Spent:
    """What a sweep has used of a decide: budget."""

    runs: int  # runs registered in the sweep (each seed of each row is one)
    wall_hours: float  # since the sweep's first attempt started
    gpu_hours: float  # sum over attempts of (end or now - start) x the run's resources.gpus


def spent(attempts: pl.DataFrame, runs: int, now: datetime) -> Spent:
    """``attempts``: frames.sweep_attempts (run_id, started, ended, gpus)."""
    import polars as pl

    if attempts.height == 0:
        return Spent(runs, 0.0, 0.0)
    end = pl.col("ended").fill_null(pl.lit(now, pl.Datetime("us", "UTC")))
    hours = ((end - pl.col("started")).dt.total_microseconds() / 3.6e9).clip(lower_bound=0)
    first = attempts["started"].min()
    wall = (now - first).total_seconds() / 3600 if isinstance(first, datetime) else 0.0
    gpu = float(attempts.select((hours * pl.col("gpus")).sum()).item() or 0.0)
    return Spent(runs, max(wall, 0.0), gpu)


def sentence(rows: pl.DataFrame, rule: DecideRule, sweep: str, baseline: str | None) -> str:
    """The adaptive sweep in one sentence, with the rule it used: how many rows are better,
    worse, within noise, undecided (the largest "about k more seeds") and inconclusive at
    the seed cap, and the family-wise error rate and correction behind those words."""
    if rows.height == 0:
        return f"{sweep}: no variant row has paired seeds with a baseline yet on {rule.metric}"
    counts = dict(rows["verdict"].value_counts().rows())
    margin = f"+-{rule.margin * 100:g} %" if rule.relative else f"+-{rule.margin:g}"
    parts = [f"{counts.get(confseq.BETTER, 0)} better", f"{counts.get(confseq.WORSE, 0)} worse",
             f"{counts.get(confseq.WITHIN, 0)} within noise ({margin})"]
    if n_open := counts.get(confseq.UNDECIDED, 0):
        more = rows.filter(rows["verdict"] == confseq.UNDECIDED)["more_seeds"].drop_nulls()
        most = more.cast(int).to_list()
        parts.append(f"{n_open} undecided" + (f" (up to about {max(most)} more seeds)"
                                              if most else ""))
    if n_cap := counts.get(confseq.INCONCLUSIVE, 0):
        parts.append(f"{n_cap} inconclusive at {rule.max_seeds} seeds")
    how = ("after Holm over" if rows["rule"][0] == "holm" else "Bonferroni over")
    return (f"{sweep}: of {rows.height} rows vs the baseline '{baseline}' on {rule.metric}, "
            + ", ".join(parts) + f"; anytime-valid intervals, {how} {rows.height} rows, "
            f"family-wise error <= {rule.error_rate * 100:g} %.")


def onto_board(board: pl.DataFrame, rows: pl.DataFrame, rule: DecideRule) -> pl.DataFrame:
    """The leaderboard of an adaptive (``decide:``) sweep, read by its own rule: each row's
    change, interval, verdict and p-value become the anytime-valid ones of ``rows``
    (read_rows, Holm on the final reading). A fixed-n t interval's level does not hold once
    seeds were added after looking -- G1 elementwise read "better" by it on a sweep whose
    anytime-valid interval, [-7.6, +2.2] %, still held 0. An open row "needs >= k seeds": k
    from more_seeds, or max_seeds + 1 when even the cap would not decide it."""
    import polars as pl

    if rows.height == 0 or board.height == 0:
        return board
    base = board.select(base_key="group_key", _base=pl.col("mean").abs())
    r = rows.join(base, on="base_key", how="left")
    bounded = pl.col("low").is_finite() & pl.col("high").is_finite()
    if rule.relative:  # fractions of the baseline's per-seed value
        pct = [pl.col(c) * 100.0 for c in ("mean", "low", "high")]
        units = [pl.col(c) * pl.col("_base") for c in ("mean", "low", "high")]
    else:
        units = [pl.col(c) for c in ("mean", "low", "high")]
        pct = [pl.col(c) / pl.col("_base") * 100.0 for c in ("mean", "low", "high")]
    open_row = pl.col("verdict") == confseq.UNDECIDED
    need = pl.col("n") + pl.col("more_seeds").fill_null(rule.max_seeds + 1 - pl.col("n"))
    sub = r.select(
        "group_key",
        _verdict=pl.when(open_row).then(pl.format(NEEDS_SEEDS.replace("{k}", "{}"), need))
        .otherwise(pl.col("verdict")),
        _need=pl.when(open_row).then(need).otherwise(None),
        _delta=units[0], _low=pl.when(bounded).then(units[1]), _high=pl.when(bounded).then(
            units[2]),
        _dpct=pct[0], _lpct=pl.when(bounded).then(pct[1]), _hpct=pl.when(bounded).then(pct[2]),
        _p="p_value", _level="level")
    out = board.join(sub, on="group_key", how="left")
    hit = pl.col("_verdict").is_not_null()

    def take(new: str, old: str) -> pl.Expr:
        return pl.when(hit).then(pl.col(new)).otherwise(pl.col(old)).alias(old)

    out = out.with_columns(
        take("_verdict", "verdict"), take("_need", "seeds_needed"), take("_delta", "delta"),
        take("_low", "ci_low"), take("_high", "ci_high"), take("_dpct", "delta_pct"),
        take("_lpct", "ci_low_pct"), take("_hpct", "ci_high_pct"), take("_p", "p_value"),
        take("_level", "ci_level"),
        pl.when(hit).then(pl.lit(ANYTIME)).otherwise(pl.col("ci_method")).alias("ci_method"),
        pl.when(hit).then(None).otherwise(pl.col("seeds_observed")).alias("seeds_observed"),
        correction=pl.lit(multiplicity.HOLM), family_error=pl.lit(rule.error_rate),
        family=pl.lit(rows.height))
    return out.drop([c for c in out.columns if c.startswith("_")])


ANYTIME = "anytime-valid"  # ci_method of a row read by onto_board
