"""The rows of a sweep that adds seeds until it decides (``decide:``), read anytime-validly.

Per non-baseline seed group (a *row*: one variant at one point of the sweep's axes, as
compare.py defines rows and their baseline group), the per-seed paired differences
d_s = x_s - b_s over the seeds both sides finished (relative: (x_s - b_s) / |b_s|, when the
margin is relative), in seed order, are read with the confidence sequence of confseq.py at
level 1 - alpha / R (Bonferroni over the R rows that have a baseline: every row shares the
baseline's seeds, and Bonferroni needs no independence). A verdict read off it stays valid
whatever the seed allocation did after looking, and it never flips back (the interval is
intersected over looks). Bonferroni is THE rule of a decide sweep (``METHOD``) on every
surface -- the allocation, status, leaderboard, dashboard and final sentence -- so the interval
shown beside a verdict is the interval that verdict was read from, and a row is decided
exactly when the allocation stops giving it seeds. ``method="holm"`` (Holm's step-down over the
rows' anytime p-values: valid, never fewer calls) remains for an explicit question, and says so.

The change a surface shows (``delta``, ``delta_pct``) is compare.py's for the same runs: the
mean paired difference, in % of |baseline mean| (compare.pct_of_base, THE percentage rule), so
the decide board, the fixed leaderboard and the per-seed dots agree. A relative margin is
tested on the per-seed relative differences (x_s - b_s) / |b_s| (a ratio of running means is
no martingale); ``mean``, ``low``, ``high`` are that statistic's, and the interval shown is
its interval.

Diverged runs are an outcome, not a missing seed: they are counted (``n_diverged``) and their
seeds are never run again, but they carry no finite value to difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from contract.states import DONE_OK, RunStatus
from results_db.analysis import confseq, multiplicity, pairing, signcs
from results_db.analysis.compare import matched_groups, pct_of_base
from results_db.analysis.decide_rule import METHOD, RULES, DecideRule
from results_db.schema.vocab import NEEDS_SEEDS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from results_db.write.decide_records import RuleChange

_UNPAIRED = pairing.Pairing(None, None)  # a row with no seed finished on both sides
# |sample skewness| of a row's differences above which the mixture t's Gaussian guarantee is
# doubtful. benchmarks/decide_sim.py (docs/reproduction.md, "Sweeps that run until they
# decide"): at true skewness 1 the mixture t's family-wise error is about half the declared
# rate, at 1.5 all of it, at 2 twice; a sample skewness of 10-20 seeds has a standard error of
# about 0.5-0.7, so a true 1.5 mostly reads above 1.
SKEW_LIMIT = 1.0
_OPEN = (RunStatus.PENDING, RunStatus.RUNNING)  # not ended: not read yet


def _states(values: pl.DataFrame) -> dict[str, dict[int, tuple[str, float | None]]]:
    """group_key -> seed -> (status, value) of the sweep's runs (one run per seed)."""
    out: dict[str, dict[int, tuple[str, float | None]]] = {}
    for g, seed, status, value in values.select("group_key", "seed", "status",
                                                "value").iter_rows():
        out.setdefault(str(g), {})[int(seed)] = (str(status), value)
    return out


@dataclass
class _Row:
    """A row's seeds sorted by kind (module docstring): the read sequence and the counts."""

    read: list[tuple[int, float]]  # (seed, d) in reading order; +-inf: one-sided divergence
    values: list[tuple[float, float]]  # (variant, baseline) of the pairs with two values
    incomplete: int = 0  # a side failed, was cancelled or lost, or has no value
    diverged_variant: int = 0  # the variant diverged and the baseline did not
    diverged_base: int = 0
    registered: int = 0


def _row(mine: dict[int, tuple[str, float | None]], base: dict[int, tuple[str, float | None]],
         rule: DecideRule, order: dict[int, int]) -> _Row:
    """Every registered seed of a row against its baseline seed. A pair with both values gives
    d = x - b (relative: / |b|); a one-sided divergence gives the worse side's infinity
    (read by the sign test; the mixture t holds the row open instead); both diverged is a tie
    (no sign, no size); a side pending or running is not read yet. Reading order: the pair's
    recorded look (``order``), then the pairs no look recorded yet, by seed."""
    worse = -math.inf if rule.higher_is_better else math.inf  # d when the variant is worse
    row = _Row([], [], registered=len(mine))
    seq: list[tuple[int, int, float]] = []
    for seed, (status, x) in mine.items():
        b_status, b = base.get(seed, ("missing", None))
        if status in _OPEN or b_status in _OPEN:
            continue
        ok_x = status == RunStatus.SUCCEEDED and x is not None and math.isfinite(x)
        ok_b = b_status == RunStatus.SUCCEEDED and b is not None and math.isfinite(b)
        if ok_x and ok_b and not (rule.relative and b == 0):
            assert x is not None and b is not None
            d = (x - b) / abs(b) if rule.relative else x - b
            seq.append((order.get(seed, 1 << 30), seed, d))
            row.values.append((x, b))
        elif status == RunStatus.DIVERGED and ok_b:
            seq.append((order.get(seed, 1 << 30), seed, worse))
            row.diverged_variant += 1
        elif b_status == RunStatus.DIVERGED and ok_x:
            seq.append((order.get(seed, 1 << 30), seed, -worse))
            row.diverged_base += 1
        elif not (status == b_status == RunStatus.DIVERGED):
            row.incomplete += 1
    row.read = [(seed, d) for _, seed, d in sorted(seq)]
    return row


def read_rows(values: pl.DataFrame, info: pl.DataFrame, baseline: str | None,
              rule: DecideRule, method: str = METHOD,
              order: dict[tuple[str, int], int] | None = None,
              settled: dict[str, dict[str, Any]] | None = None) -> pl.DataFrame:
    """One row per non-baseline group with a baseline: variant, lr, group_key, base_key, n
    (pairs read), n_diverged, seeds (all seeds the row has a finished run for), read_seeds
    (the seeds read, in reading order), incomplete, diverged_variant, diverged_base, mean,
    low, high (of the difference -- the median for the sign test; relative ones as
    fractions), p_value, skew, pair_corr and seed_multiplier (what pairing the seeds bought:
    pairing.py, over the raw values), verdict, settled_look, note, more_seeds (about how many
    more paired seeds would decide it if the spread stays; null when the cap would not, and
    for the sign test), family (R), level (1 - alpha / R), rule, test.
    ``values``: (run_id, group_key, seed, status, value) of every run of the sweep;
    ``info``: frames.group_info; ``order``: (group_key, seed) -> recorded look (db.pair_order);
    ``settled``: group_key -> the look that decided it under the current rule (db.settled),
    whose verdict and interval stand: a verdict never flips back."""
    if method not in RULES:
        raise ValueError(f"rule: expected one of {RULES}, got {method!r}")
    table = matched_groups(values, info, baseline)
    if table.height == 0 or "is_baseline" not in table.columns:
        return pl.DataFrame()
    rows = table.filter(~pl.col("is_baseline") & pl.col("base_key").is_not_null())
    family = max(rows.height, 1)
    alpha_row = rule.error_rate / family
    states = _states(values)
    order = order or {}
    done = (values.filter(pl.col("status").is_in([s.value for s in DONE_OK]))
            .group_by("group_key").agg(pl.col("seed").unique().sort().alias("done")))
    done_by = dict(zip(done["group_key"].to_list(), done["done"].to_list(), strict=True))
    out, parts = [], []
    for r in rows.iter_rows(named=True):
        key = r["group_key"]
        seeds = _row(states.get(key, {}), states.get(r["base_key"], {}), rule,
                     {s: look for (g, s), look in order.items() if g == key})
        parts.append(seeds)
        d = np.array([v for _, v in seeds.read], dtype=float)
        finite = d[np.isfinite(d)]
        reading = (signcs.read(d, alpha_row) if rule.test == "sign"
                   else confseq.read(finite, alpha_row, rule.g))
        paired = (pairing.pairing([x for x, _ in seeds.values], [b for _, b in seeds.values])
                  if seeds.values else _UNPAIRED)
        diffs = [x - b for x, b in seeds.values]
        out.append({**{k: r.get(k) for k in ("variant", "lr", "group_key", "base_key")},
                    "delta": float(np.mean(diffs)) if diffs else None,
                    "base_mean": float(np.mean([b for _, b in seeds.values])) if diffs else None,
                    "n": reading.n, "n_diverged": r["n_diverged"],
                    "seeds": done_by.get(key, []), "read_seeds": [s for s, _ in seeds.read],
                    "incomplete": seeds.incomplete,
                    "diverged_variant": seeds.diverged_variant,
                    "diverged_base": seeds.diverged_base,
                    "mean": reading.mean if reading.n else None, "sd": reading.sd,
                    "low": reading.low, "high": reading.high, "p_value": reading.p_value,
                    "skew": _skew(finite),
                    "pair_corr": paired.corr, "seed_multiplier": paired.multiplier})
    frame = pl.DataFrame(out, infer_schema_length=None)
    frame = frame.with_columns(delta_pct=pct_of_base(pl.col("delta"), pl.col("base_mean")))
    low, high = frame["low"].to_numpy(), frame["high"].to_numpy()
    at_cap = np.array([p.registered >= rule.max_seeds for p in parts])
    verdict = confseq.verdicts(low, high, rule.margin, rule.higher_is_better, at_cap=at_cap)
    if method == multiplicity.HOLM:
        mean = frame["mean"].fill_null(0.0).to_numpy()
        hit = multiplicity.holm(frame["p_value"].to_numpy(), rule.error_rate)
        good = mean > 0 if rule.higher_is_better else mean < 0
        verdict = np.where(hit, np.where(good, confseq.BETTER, confseq.WORSE), verdict)
    if rule.test == "mixture_t":  # one-sided divergences: the t rule cannot read their size
        open_ = np.where(at_cap, confseq.INCONCLUSIVE, confseq.UNDECIDED)
        var_div = np.array([p.diverged_variant > 0 for p in parts])
        base_div = np.array([p.diverged_base > 0 for p in parts])
        blocked = ((var_div & np.isin(verdict, [confseq.BETTER, confseq.WITHIN]))
                   | (base_div & np.isin(verdict, [confseq.WORSE, confseq.WITHIN])))
        verdict = np.where(blocked, open_, verdict)
    verdict, low, high, looks = _settle(frame["group_key"].to_list(), verdict, low, high,
                                        settled or {})
    more = [_more(m, s, n, rule, alpha_row) if v == confseq.UNDECIDED and rule.test ==
            "mixture_t" else None
            for m, s, n, v in zip(frame["mean"], frame["sd"], frame["n"], verdict,
                                  strict=True)]
    frame = frame.with_columns(low=pl.Series(low), high=pl.Series(high),
                               verdict=pl.Series(verdict.tolist(), dtype=pl.String),
                               settled_look=pl.Series(looks, dtype=pl.Int64))
    return frame.with_columns(note=pl.Series(_notes(frame, rule), dtype=pl.String),
                              more_seeds=pl.Series(more, dtype=pl.Int64),
                              family=pl.lit(family), level=pl.lit(1.0 - alpha_row),
                              rule=pl.lit(method), test=pl.lit(rule.test))


def _skew(d: np.ndarray) -> float | None:
    """The bias-corrected sample skewness of a row's finite differences (three or more, with a
    spread beyond rounding), else None."""
    if len(d) < 3 or float(np.std(d)) <= 1e-9 * float(np.abs(d).max()):
        return None  # (nearly) constant: no shape to speak of
    from scipy import stats  # scipy: 0.3 s that `import results_db` does not pay

    return float(stats.skew(d, bias=False))


def _settle(keys: list[str], verdict: np.ndarray, low: np.ndarray, high: np.ndarray,
            settled: dict[str, dict[str, Any]]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int | None]]:
    """A row a recorded look decided keeps that look's verdict and interval (NULL ends of a
    stored interval are unbounded)."""
    verdict, low, high = verdict.astype(object), low.copy(), high.copy()
    looks: list[int | None] = []
    for i, key in enumerate(keys):
        s = settled.get(key)
        looks.append(None if s is None else int(s["look"]))
        if s is not None:
            verdict[i] = s["verdict"]
            low[i] = -math.inf if s["low"] is None else s["low"]
            high[i] = math.inf if s["high"] is None else s["high"]
    return verdict, low, high, looks


def _notes(frame: pl.DataFrame, rule: DecideRule) -> list[str | None]:
    """What qualifies a row's verdict, in words: incomplete pairs, one-sided divergences, a
    skew the mixture t's guarantee does not cover, the look that settled it."""
    out: list[str | None] = []
    for r in frame.iter_rows(named=True):
        said = []
        if r["incomplete"]:
            said.append(f"{r['incomplete']} pair(s) incomplete (a side failed or was lost)")
        for side, k in (("variant", r["diverged_variant"]), ("baseline", r["diverged_base"])):
            if k:
                said.append(f"{k} seed(s) diverged on the {side}'s side only"
                            + (": the mixture t cannot size them (test: sign reads them)"
                               if rule.test == "mixture_t" else ""))
        if rule.test == "mixture_t" and r["skew"] is not None and abs(r["skew"]) > SKEW_LIMIT:
            said.append(f"skewed differences (skewness {r['skew']:+.1f}, beyond "
                        f"+-{SKEW_LIMIT:g}): the mixture t assumes Gaussian ones; test: sign "
                        "does not")
        if r["settled_look"] is not None:
            said.append(f"decided at look {r['settled_look']}")
        out.append("; ".join(said) or None)
    return out


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
    if attempts.height == 0:
        return Spent(runs, 0.0, 0.0)
    end = pl.col("ended").fill_null(pl.lit(now, pl.Datetime("us", "UTC")))
    hours = ((end - pl.col("started")).dt.total_microseconds() / 3.6e9).clip(lower_bound=0)
    first = attempts["started"].min()
    wall = (now - first).total_seconds() / 3600 if isinstance(first, datetime) else 0.0
    gpu = float(attempts.select((hours * pl.col("gpus")).sum()).item() or 0.0)
    return Spent(runs, max(wall, 0.0), gpu)


def sentence(rows: pl.DataFrame, rule: DecideRule, sweep: str, baseline: str | None,
             changes: Sequence[RuleChange] = ()) -> str:
    """The adaptive sweep in one sentence, with the rule it used: how many rows are better,
    worse, within noise, undecided (the largest "about k more seeds") and inconclusive at
    the seed cap (with their incomplete pairs), the family-wise error rate and correction
    behind those words, and every change of the rule after the sweep had runs."""
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
        capped = rows.filter(rows["verdict"] == confseq.INCONCLUSIVE)
        broken = int(capped["incomplete"].sum()) if "incomplete" in capped.columns else 0
        parts.append(f"{n_cap} inconclusive at {rule.max_seeds} seeds"
                     + (f" ({broken} pairs incomplete)" if broken else ""))
    how = ("after Holm over" if rows["rule"][0] == multiplicity.HOLM else "Bonferroni over")
    said = (f"{sweep}: of {rows.height} rows vs the baseline '{baseline}' on {rule.metric}, "
            + ", ".join(parts) + f"; {interval_words(rule)}, {how} {rows.height} "
            f"rows, family-wise error <= {rule.error_rate * 100:g} %.")
    for c in changes:
        said += (f" The rule changed after {c.seeds} seeds ({c.runs} runs, "
                 f"{c.changed:%Y-%m-%d %H:%M} UTC): " + "; ".join(c.differences()) + ".")
    return said


def interval_words(rule: DecideRule) -> str:
    """What a decide rule's intervals are, in words: "anytime-valid mixture-t intervals"
    (every surface that shows them names them so)."""
    return f"{ANYTIME} {'sign-test' if rule.test == 'sign' else 'mixture-t'} intervals"


def onto_board(board: pl.DataFrame, rows: pl.DataFrame, rule: DecideRule) -> pl.DataFrame:
    """The leaderboard of an adaptive (``decide:``) sweep, read by its own rule: each row's
    change, interval, verdict and p-value become the anytime-valid ones of ``rows``
    (read_rows: the change by compare.py's rule, the interval and verdict by the decide
    rule). A fixed-n t interval's level does not hold once
    seeds were added after looking -- G1 elementwise read "better" by it on a sweep whose
    anytime-valid interval, [-7.6, +2.2] %, still held 0. An open row "needs >= k seeds": k
    from more_seeds, or max_seeds + 1 when even the cap would not decide it."""
    if rows.height == 0 or board.height == 0:
        return board
    base = board.select(base_key="group_key", _base=pl.col("mean").abs())
    r = rows.join(base, on="base_key", how="left")
    bounded = pl.col("low").is_finite() & pl.col("high").is_finite()
    if rule.relative:  # fractions of the baseline's per-seed value
        pct = [pl.col(c) * 100.0 for c in ("low", "high")]
        units = [pl.col(c) * pl.col("_base") for c in ("low", "high")]
    else:
        units = [pl.col(c) for c in ("low", "high")]
        pct = [pct_of_base(pl.col(c), pl.col("_base")) for c in ("low", "high")]
    open_row = pl.col("verdict") == confseq.UNDECIDED
    need = pl.col("n") + pl.col("more_seeds").fill_null(rule.max_seeds + 1 - pl.col("n"))
    sub = r.select(
        "group_key",
        _verdict=pl.when(open_row).then(pl.format(NEEDS_SEEDS.replace("{k}", "{}"), need))
        .otherwise(pl.col("verdict")),
        _need=pl.when(open_row).then(need).otherwise(None),
        _delta="delta", _low=pl.when(bounded).then(units[0]), _high=pl.when(bounded).then(
            units[1]),
        _dpct=pct_of_base(pl.col("delta"), pl.col("_base")),
        _lpct=pl.when(bounded).then(pct[0]), _hpct=pl.when(bounded).then(pct[1]),
        _p="p_value", _level="level")
    out = board.join(sub, on="group_key", how="left", maintain_order="left")  # board order
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
        correction=pl.lit(rows["rule"][0]), family_error=pl.lit(rule.error_rate),
        family=pl.lit(rows.height))
    return out.drop([c for c in out.columns if c.startswith("_")])


ANYTIME = "anytime-valid"  # ci_method of a row read by onto_board
