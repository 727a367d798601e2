"""Does a variant's gain survive scale? Paired deltas vs tokens, model size and compute.

Every evaluation step of a run is a point on its curve; every seed group (compare.py's groups:
one config, several seeds) is compared with its baseline group (compare._match: the same
value of every axis the baseline was swept over, e.g. ``n_layer``), seed by seed:

- **points** (one row per group and evaluation step): d_s = x_s - b_s for each seed s both
  runs evaluated at that step; delta = mean(d), 95 % CI mean +- t(n-1) sd(d) / sqrt(n) (the
  paired CI of stats.delta_ci), in % of the baseline's mean at that step. ``tokens`` =
  step x tokens per step; ``flops`` = tokens x training FLOPs per token (contract/flops.py).
  **iso-FLOP**: the gate costs FLOPs, so the baseline of the same seed is read at the compute
  the variant spent: at tokens x f_variant / f_base, interpolated linearly in log10(tokens)
  between its evaluation points (null beyond its last one).
- **trends** (x = tokens: one row per group; x = params / flops: one per variant and LR,
  across the sizes): the slope of delta % against log10(x) in percentage points per decade.
  Its uncertainty comes from the seeds, the independent replicates (the points of one run are
  not independent): one least-squares slope per seed (numpy.polyfit), then the mean slope
  with the t-interval over seeds. x = params / flops uses each size's last common step.
  Fewer than two distinct x values: "cannot judge" (no line through one point); one seed: a
  slope without a CI. ``iso_flops`` rows: the iso-FLOP delta at the largest compute both
  reached, per group.
- **words** (verdict.interval_verdict, the leaderboard's rule): a slope whose CI excludes 0
  "shifts in the variant's favour" / "shifts in the baseline's favour" (by the metric's
  direction), with "its lead / deficit grows / shrinks" only when the first point's own CI
  excludes 0; "flat within noise" only when the slope's CI lies inside +-100 x min_effect pp
  per decade (over a tenfold scale-up the change moves by less than the smallest effect that
  matters; 1 pp by default); else "inconclusive". At equal compute: better / worse / "within
  noise at equal compute" (the CI inside +-100 x min_effect %) / "inconclusive at equal
  compute". A CI that merely contains 0 is never called flat or within noise.
- **undefined**: a change in % of a baseline mean of 0 has no value, and values near the
  float limits (1e308 against 1e-308) overflow to inf/NaN. Such a point's delta % and CI are
  null, never inf/NaN; trends rest on the points where the comparison is finite and their
  sentence names the points where it is not; with none left the verdict is "undefined", never
  a verdict computed from NaN.
- **not finite**: a group whose runs diverged, or logged the metric only as NaN or inf, has no
  point to pair; it is named in a sentence of its own (``notes``) instead of being left out
  silently, and an empty answer says why it is empty (``reason``): "not logged" only when no
  run logged the metric.

Pure polars/numpy: the DB reads are in api.py (AnalysisMixin.scaling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from contract.analysis_defaults import MIN_EFFECT
from contract.states import RunStatus
from results_db.analysis.compare import _match
from results_db.analysis.stats import LEVEL, fmean, sum_sq, t_quantile
from results_db.analysis.verdict import BETTER, INCONCLUSIVE, WITHIN, WORSE, interval_verdict
from results_db.schema.vocab import DIMENSIONS

DIVERGED = RunStatus.DIVERGED.value

POINT_COLUMNS = ("variant", "lr", "size", "group_key", "step", "tokens", "flops",
                 "params_total", "n", "base_mean", "mean", "delta", "delta_pct", "ci_low_pct",
                 "ci_high_pct", "iso_n", "iso_delta_pct", "iso_ci_low_pct", "iso_ci_high_pct")
# step / last_step: the evaluation step the change (delta_pct_to and its CI) was read at and
# the last one of the curve: at the end for a trend over tokens, mid-training for the change at
# equal compute ("step 200 of 400"); null across sizes (each size's last step)
TREND_COLUMNS = ("variant", "lr", "size", "x", "n_points", "n_seeds", "x_from", "x_to",
                 "step", "last_step",
                 "delta_pct_from", "delta_pct_to", "ci_low_pct", "ci_high_pct", "slope",
                 "slope_ci_low", "slope_ci_high", "flops_overhead_pct", "verdict", "sentence")
UNITS = {"tokens": "tokens", "params": "parameters", "flops": "FLOPs", "iso_flops": "FLOPs"}
UNDEFINED = "undefined: the baseline's mean is 0 or the values are not finite floats"
# interval_verdict's four words, said of a slope and of the change at equal compute
TREND_WORDS = {BETTER: "shifts in the variant's favour", WORSE: "shifts in the baseline's favour",
               WITHIN: "flat within noise", INCONCLUSIVE: "inconclusive"}
ISO_WORDS = {BETTER: "better at equal compute", WORSE: "worse at equal compute",
             WITHIN: "within noise at equal compute", INCONCLUSIVE: "inconclusive at equal compute"}


@dataclass(frozen=True)
class Scaling:
    points: pl.DataFrame  # POINT_COLUMNS
    trends: pl.DataFrame  # TREND_COLUMNS
    metric: str
    baseline: str | None
    notes: tuple[str, ...] = ()  # groups with no finite point (diverged): one sentence each
    reason: str = ""  # why there is no point at all (empty otherwise)

    @property
    def sentences(self) -> list[str]:
        return [*(str(s) for s in self.trends["sentence"].to_list()), *self.notes]

    def said(self, sweep: str) -> list[str]:
        """What a surface (the CLI, the dashboard) says of it: the sentences, or why there are
        none."""
        return self.sentences or [f"{sweep}: {self.reason}"]


def _sizes(info: pl.DataFrame) -> pl.DataFrame:
    """group_key, base_key and a ``size`` label ("n_layer=2"; "all" without a size axis): the
    dimensions (but lr) the baseline was swept over, at the group's values."""
    bases = info.filter(pl.col("is_baseline"))
    dims = [c for c in DIMENSIONS if c != "lr" and c in bases.columns
            and bases[c].n_unique() > 1]
    label = (pl.concat_str([pl.lit(f"{c}=") + pl.col(c).cast(pl.String).fill_null("-")
                            for c in dims], separator=", ") if dims else pl.lit("all"))
    return info.with_columns(size=label)


def _ci(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high): the two-sided t-interval over ``values`` (no CI for one); all None
    when the arithmetic leaves the finite floats (no verdict may come from inf/NaN)."""
    n = len(values)
    mean = fmean(values)
    if not math.isfinite(mean):
        return None, None, None
    if n < 2:
        return mean, None, None
    sd = math.sqrt(sum_sq(values, mean) / (n - 1))
    half = t_quantile(0.5 + LEVEL / 2, n - 1) * sd / math.sqrt(n)
    if not math.isfinite(half):
        return None, None, None
    return mean, mean - half, mean + half


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _slope(x: Sequence[float], y: Sequence[float | None]) -> float | None:
    """Least-squares slope of y on log10(x) (numpy.polyfit) over the finite y (an undefined
    point is null); None with < 2 distinct x left, or when the fit is not finite."""
    import numpy as np

    kept = [(a, b) for a, b in zip(x, y) if _finite(b)]
    if len({a for a, _ in kept}) < 2:
        return None
    with np.errstate(all="ignore"):
        fit = float(np.polyfit(np.log10(np.asarray([a for a, _ in kept], float)),
                               np.asarray([b for _, b in kept], float), 1)[0])
    return fit if math.isfinite(fit) else None


def _iso(pairs: pl.DataFrame, pts: pl.DataFrame) -> pl.DataFrame:
    """Per (group_key, seed, step) of ``pairs``: the baseline of the same seed at the
    variant's compute (interpolated in log10 tokens over its curve in ``pts``; null outside
    its evaluated range) -> ``iso_base``. One numpy.interp per (group, seed)."""
    import numpy as np
    curves = {(k, s): (np.asarray(t, float), np.asarray(v, float)) for k, s, t, v in
              pts.group_by("group_key", "seed").agg("tokens", "value").iter_rows()}
    out = []
    for (_, seed), g in pairs.group_by("group_key", "seed", maintain_order=True):
        bt, bv = curves[(g["base_key"][0], seed)]
        need = g["tokens"].to_numpy() * g["fpt"].to_numpy() / g["base_fpt"].to_numpy()
        inside = (need >= bt.min()) & (need <= bt.max() * (1 + 1e-12))
        iso = np.interp(np.log10(need), np.log10(bt), bv)
        out.append(g.select("group_key", "seed", "step").with_columns(
            iso_base=pl.Series(np.where(inside, iso, np.nan)).fill_nan(None)))
    return pl.concat(out)


def _pairs(series: pl.DataFrame, runs: pl.DataFrame, cells: pl.DataFrame,
           costs: pl.DataFrame) -> pl.DataFrame:
    """One row per (non-baseline group, seed, step) that both it and its baseline evaluated:
    value, base_value, tokens, flops, and the iso-FLOP baseline value."""
    pts = (series.filter((pl.col("step") > 0) & pl.col("value").is_finite())
           .join(runs.select("run_id", "group_key", "seed"), on="run_id")
           .join(costs.select("group_key", "tokens_per_step", "fpt"), on="group_key")
           .with_columns(tokens=pl.col("step") * pl.col("tokens_per_step"))
           .with_columns(flops=pl.col("tokens").cast(pl.Float64) * pl.col("fpt"))
           .sort("group_key", "seed", "step"))
    base = pts.select(base_key="group_key", seed="seed", step="step", base_value="value",
                      base_fpt="fpt")
    pairs = (pts.join(cells.filter(~pl.col("is_baseline") & pl.col("base_key").is_not_null())
                      .select("group_key", "base_key"), on="group_key")
             .join(base, on=["base_key", "seed", "step"])
             .sort("group_key", "seed", "step"))
    if pairs.height == 0:
        return pairs.with_columns(iso_base=pl.lit(None, pl.Float64))
    return pairs.join(_iso(pairs, pts), on=["group_key", "seed", "step"], how="left")


def _points(pairs: pl.DataFrame, cells: pl.DataFrame) -> pl.DataFrame:
    d, di = pl.col("value") - pl.col("base_value"), pl.col("value") - pl.col("iso_base")
    agg = pairs.group_by("group_key", "step").agg(
        tokens=pl.col("tokens").first(), flops=pl.col("flops").first(),
        n=pl.len().cast(pl.Int64), base_mean=pl.col("base_value").mean(),
        mean=pl.col("value").mean(), delta=d.mean(), _sd=d.std(),
        iso_n=di.count().cast(pl.Int64), _iso_base=pl.col("iso_base").mean(),
        _iso_d=di.mean(), _iso_sd=di.std())
    # the inputs are finite (_pairs): an inf/NaN here is an overflow (1e308 - 1e-308 summed
    # over seeds), an undefined value, not a measurement
    agg = agg.with_columns(pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c) for c in (
        "base_mean", "mean", "delta", "_sd", "_iso_base", "_iso_d", "_iso_sd"))
    rows = []
    for r in agg.iter_rows(named=True):
        t = t_quantile(0.5 + LEVEL / 2, r["n"] - 1) if r["n"] >= 2 else None
        ti = t_quantile(0.5 + LEVEL / 2, r["iso_n"] - 1) if r["iso_n"] >= 2 else None
        rows.append({**_pct(r["delta"], r["_sd"], r["n"], t, r["base_mean"], ""),
                     **_pct(r["_iso_d"], r["_iso_sd"], r["iso_n"], ti, r["_iso_base"], "iso_")})
    pct = pl.DataFrame(rows, schema={c: pl.Float64 for c in (
        "delta_pct", "ci_low_pct", "ci_high_pct", "iso_delta_pct", "iso_ci_low_pct",
        "iso_ci_high_pct")}) if rows else None
    out = agg if pct is None else pl.concat([agg, pct], how="horizontal")
    out = out.join(cells.select("group_key", "variant", "lr", "size", "params_total", "_row"),
                   on="group_key")
    return out.sort("_row", "step")


def _pct(mean: float | None, sd: float | None, n: int, t: float | None, base: float | None,
         prefix: str) -> dict[str, float | None]:
    """delta %, CI low/high % of one point (all None where undefined: a baseline mean of 0,
    or values whose difference or spread is not a finite float)."""
    pct = low = high = None
    if mean is not None and base is not None and _finite(mean) and _finite(base) and base != 0 \
            and n >= 1:
        pct = 100.0 * (mean / base)  # divided first: 100 * 1e307 overflows, the ratio not
        if t is not None and sd is not None:
            half = 100.0 * t * (sd / math.sqrt(n) / abs(base))
            low, high = pct - half, pct + half
    if not all(v is None or math.isfinite(v) for v in (pct, low, high)):
        pct = low = high = None
    return {f"{prefix}delta_pct": pct, f"{prefix}ci_low_pct": low, f"{prefix}ci_high_pct": high}


def _fmt(x: float, unit: str) -> str:
    """51k tokens, 1.6M parameters, 4.2e+11 FLOPs."""
    if unit == "FLOPs":
        return f"{x:.2g}"
    for div, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}"
    return f"{x:.3g}"


def _slope_verdict(n_x: int, slopes: Sequence[float], low: float | None, high: float | None,
                   higher: bool, x: str, margin: float) -> str:
    """TREND_WORDS by verdict.interval_verdict on the slope's CI, ``margin`` in pp/decade."""
    if n_x < 2:
        return "cannot judge: one evaluation point" if x == "tokens" else \
            "cannot judge: one model size"
    if not slopes:
        return "no data"
    if low is None or high is None:
        return "one seed: no CI"
    return TREND_WORDS[interval_verdict(low, high, margin, higher_is_better=higher)]


def _gap(first: dict, verdict: str, higher: bool) -> str:
    """", its deficit grows" (or lead / shrinks): only when the slope's CI says which way it
    moves and the first point's own CI says which side the variant started on."""
    low, high = first.get("ci_low_pct"), first.get("ci_high_pct")
    side = None if low is None or high is None else \
        interval_verdict(low, high, None, higher_is_better=higher)
    if side not in (BETTER, WORSE) or verdict not in (TREND_WORDS[BETTER], TREND_WORDS[WORSE]):
        return ""
    what = "lead" if side == BETTER else "deficit"
    grows = (side == BETTER) == (verdict == TREND_WORDS[BETTER])
    return f", its {what} {'grows' if grows else 'shrinks'}"


def _why(verdict: str, margin: float, unit: str) -> str:
    """The margin behind "flat within noise" / "inconclusive", said where the word is."""
    if verdict in (TREND_WORDS[WITHIN], ISO_WORDS[WITHIN]):
        return f" (the CI lies inside +-{margin:g} {unit})"
    if verdict in (TREND_WORDS[INCONCLUSIVE], ISO_WORDS[INCONCLUSIVE]):
        return f" (the CI contains 0 but reaches beyond +-{margin:g} {unit})"
    return ""


def _iso_verdict(low: float | None, high: float | None, pct: float | None,
                 higher: bool, margin: float, reached: bool = False) -> str:
    """ISO_WORDS by verdict.interval_verdict on the CI in %, ``margin`` in %."""
    if pct is None and reached:
        return UNDEFINED
    if pct is None:
        return "cannot compare: the baseline's curve does not reach the variant's compute"
    if low is None or high is None:
        return "one seed: no CI"
    return ISO_WORDS[interval_verdict(low, high, margin, higher_is_better=higher)]


def _label(row: dict[str, object], with_lr: bool) -> str:
    parts = [str(row["size"])] if row["size"] != "all" else []
    parts += [f"lr {row['lr']:g}"] if with_lr and row["lr"] is not None else []
    return f"{row['variant']}" + (f" ({', '.join(parts)})" if parts else "")


def _trend_row(base: dict[str, object], x: str, xs: Sequence[float], per_seed: dict[int, tuple],
               pts: Sequence[dict], higher: bool, metric: str, name: str,
               margin: float) -> dict:
    """One trend row: slope per seed over (x, y) pairs, mean and t-CI over seeds, sentence.
    ``pts`` are the points at ``xs`` (delta_pct, ci_low_pct, ci_high_pct; None: undefined)."""
    slopes = [s for s in (_slope(*per_seed[k]) for k in sorted(per_seed)) if s is not None]
    slope, low, high = _ci(slopes) if slopes else (None, None, None)
    defined = [(xv, p) for xv, p in zip(xs, pts) if p["delta_pct"] is not None]
    undefined = sorted({xv for xv, p in zip(xs, pts) if p["delta_pct"] is None})
    n_x, n_def = len(set(xs)), len({xv for xv, _ in defined})
    unit = UNITS[x]
    if not defined or (slopes and slope is None) or (undefined and n_x >= 2 and n_def < 2):
        verdict = UNDEFINED
    else:
        verdict = _slope_verdict(n_x, slopes, low, high, higher, x, margin)
    first, last = (defined[0][1], defined[-1][1]) if defined else (pts[0], pts[-1])
    to = last["delta_pct"]
    at_x = (f"{', '.join(_fmt(v, unit) for v in undefined[:3])}"
            f"{' ...' if len(undefined) > 3 else ''} {unit}")
    where = (f" The comparison is undefined at {at_x} (the baseline's mean is 0 or a value is "
             "not a finite float there)." if undefined else "")
    if not defined:
        sentence = (f"{name}: Δ {metric} is undefined at {at_x}: the baseline's mean is 0 or a "
                    "value is not a finite float there.")
        slope = low = high = None
    elif n_x < 2 or verdict == UNDEFINED:
        at = f"{to:+.2f} % at {_fmt(defined[-1][0], unit)} {unit}"
        sentence = f"{name}: Δ {metric} {at}; {verdict}.{where}"
        slope = low = high = None
    else:
        ci = f" [{low:+.2f}, {high:+.2f}]" if low is not None and high is not None else ""
        fr = first["delta_pct"]
        sentence = (f"{name}: Δ {metric} goes from {fr:+.2f} % at {_fmt(defined[0][0], unit)} "
                    f"{unit} to {to:+.2f} % at {_fmt(defined[-1][0], unit)}; slope "
                    f"{slope:+.2f} pp per decade{ci} over {len(slopes)} "
                    f"seed{'s' if len(slopes) != 1 else ''}: {verdict}"
                    f"{_gap(first, verdict, higher)}{_why(verdict, margin, 'pp per decade')}."
                    f"{where}")
    step = last.get("step") if x == "tokens" else None
    return {**base, "x": x, "n_points": n_x, "n_seeds": len(slopes),
            "x_from": float(min(xs)) if xs else None, "x_to": float(max(xs)) if xs else None,
            "step": step, "last_step": step,
            "delta_pct_from": first["delta_pct"], "delta_pct_to": to,
            "ci_low_pct": last["ci_low_pct"], "ci_high_pct": last["ci_high_pct"],
            "slope": slope, "slope_ci_low": low, "slope_ci_high": high, "verdict": verdict,
            "sentence": sentence}


def _iso_row(base: dict[str, object], pts: list[dict], higher: bool, metric: str,
             name: str, margin: float) -> dict:
    """The iso-FLOP delta at the largest compute where the baseline's curve reaches it."""
    have = [p for p in pts if p["iso_delta_pct"] is not None]
    p = max(have, key=lambda r: (r["iso_n"], r["step"])) if have else pts[-1]
    pct = p["iso_delta_pct"] if have else None
    low, high = (p["iso_ci_low_pct"], p["iso_ci_high_pct"]) if have else (None, None)
    verdict = _iso_verdict(low, high, pct, higher, margin,
                           reached=any(q["iso_n"] for q in pts))
    over = base["flops_overhead_pct"]
    cost = f"; it costs {over:+.1f} % FLOPs per token" if over is not None else ""
    last = pts[-1]["step"]
    # a mid-training reading says so: the baseline's curve reaches the variant's compute only
    # up to its own last step, so this is often the middle of training, never "at end"
    at = (f"Δ {metric} {pct:+.2f} %" + (f" [{low:+.2f}, {high:+.2f}]" if low is not None else "")
          + f" at step {p['step']} of {last} ({_fmt(p['flops'], 'FLOPs')} FLOPs)"
          ) if pct is not None else "no iso-FLOP point"
    return {**base, "x": "iso_flops", "n_points": 1 if have else 0,
            "n_seeds": p["iso_n"] if have else 0, "x_from": p["flops"], "x_to": p["flops"],
            "step": p["step"] if have else None, "last_step": last,
            "delta_pct_from": pct, "delta_pct_to": pct, "ci_low_pct": low, "ci_high_pct": high,
            "slope": None, "slope_ci_low": None, "slope_ci_high": None, "verdict": verdict,
            "sentence": f"{name} at equal compute: {at}{cost}: {verdict}"
                        f"{_why(verdict, margin, '%')}."}


def _trends(pairs: pl.DataFrame, points: pl.DataFrame, cells: pl.DataFrame, higher: bool,
            metric: str, margin: float) -> list[dict]:
    """The trend rows (module docstring); ``margin``: 100 x min_effect, in pp per decade for
    a slope and in % for the change at equal compute."""
    with_lr = cells["lr"].n_unique() > 1
    rows: list[dict] = []
    finals: dict[tuple, list[tuple[dict, pl.DataFrame]]] = {}
    for cell in cells.filter(~pl.col("is_baseline")).iter_rows(named=True):
        pts = points.filter(pl.col("group_key") == cell["group_key"]).sort("step")
        if pts.height == 0:
            continue
        pr = pairs.filter(pl.col("group_key") == cell["group_key"])
        base = {"variant": cell["variant"], "lr": cell["lr"], "size": cell["size"],
                "flops_overhead_pct": cell["flops_overhead_pct"]}
        name, plist = _label(cell, with_lr), pts.to_dicts()
        by_seed = {s: (g["tokens"].to_list(), g["d_pct"].to_list())
                   for (s,), g in pr.group_by("seed", maintain_order=True)}
        rows.append(_trend_row(base, "tokens", pts["tokens"].to_list(), by_seed, plist,
                               higher, metric, name, margin))
        rows.append(_iso_row(base, plist, higher, metric, name, margin))
        last = pr.filter(pl.col("step") == plist[-1]["step"])
        finals.setdefault((cell["variant"], cell["lr"]), []).append(({**cell, **plist[-1]}, last))
    for (variant, lr), sizes in finals.items():
        name = _label({"variant": variant, "lr": lr, "size": "all"}, with_lr) + " across sizes"
        base = {"variant": variant, "lr": lr, "size": None, "flops_overhead_pct": None}
        for x in ("params", "flops"):
            col = "params_total" if x == "params" else "flops"
            have = sorted((s for s in sizes if s[0][col] is not None), key=lambda s: s[0][col])
            if not have:
                continue
            per_seed: dict[int, tuple[list[float], list[float]]] = {}
            for p, last in have:
                for seed, y in last.select("seed", "d_pct").iter_rows():
                    xs, ys = per_seed.setdefault(seed, ([], []))
                    xs.append(float(p[col]))
                    ys.append(y)
            rows.append(_trend_row(base, x, [float(p[col]) for p, _ in have], per_seed,
                                   [p for p, _ in have], higher, metric, name, margin))
    return rows


def scaling(series: pl.DataFrame, runs: pl.DataFrame, info: pl.DataFrame,
            costs: pl.DataFrame, baseline: str | None, metric: str, *, higher: bool,
            states: Sequence[str], min_effect: float = MIN_EFFECT) -> Scaling:
    """``series``: the metric's points (run_id, step, value); ``runs``: run_id, group_key,
    seed, status; ``info``: the groups' labels (frames.group_info); ``costs``: group_key,
    tokens_per_step, params, fpt (training FLOPs per token): contract/params.py and
    contract/flops.py over the group's config; ``min_effect``: the smallest relative change
    that matters (the margin of "flat" and "within noise"). Module docstring for the rules."""
    if not 0 < min_effect < math.inf:
        raise ValueError(f"min_effect: a relative effect > 0 (0.01 = 1 %), got {min_effect}")

    # typed up front: an empty read (no finished run, no points) comes back with Null columns
    series = series.select(pl.col("run_id").cast(pl.Int64), pl.col("step").cast(pl.Int64),
                           pl.col("value").cast(pl.Float64))
    runs = runs.with_columns(pl.col("run_id").cast(pl.Int64), pl.col("seed").cast(pl.Int64),
                             pl.col("group_key").cast(pl.String), pl.col("status").cast(pl.String))
    costs = costs.with_columns(pl.col("group_key").cast(pl.String),
                               pl.col("tokens_per_step").cast(pl.Int64),
                               pl.col("params").cast(pl.Int64), pl.col("fpt").cast(pl.Float64))
    info = info.with_columns(pl.col("group_key").cast(pl.String))
    ok = runs.filter(pl.col("status").is_in(list(states)))
    cells = _sizes(_match(info.with_row_index("_row"), baseline))
    fpt = costs.select("group_key", "fpt")
    cells = (cells.drop("params_total", strict=False)
             .join(costs.select("group_key", params_total="params"), on="group_key", how="left")
             .join(fpt, on="group_key", how="left")
             .join(fpt.rename({"group_key": "base_key", "fpt": "_bfpt"}), on="base_key",
                   how="left")
             .with_columns(flops_overhead_pct=100.0 * (pl.col("fpt") / pl.col("_bfpt") - 1.0)))
    pairs = _pairs(series.filter(pl.col("run_id").is_in(ok["run_id"].implode())), ok, cells,
                   costs.filter(pl.col("fpt").is_not_null()))
    notes = _not_finite(series, runs, ok, cells, metric)
    if pairs.height == 0:
        return Scaling(_empty(POINT_COLUMNS), _empty(TREND_COLUMNS), metric, baseline, notes,
                       _why_empty(series, ok, baseline, metric, states))
    points = _points(pairs, cells)
    pairs = pairs.join(points.select("group_key", "step", "base_mean"), on=["group_key", "step"])
    d_pct = 100.0 * ((pl.col("value") - pl.col("base_value")) / pl.col("base_mean"))
    # a baseline mean of 0, or an overflow: null (undefined), never inf/NaN in a slope
    pairs = pairs.with_columns(d_pct=pl.when(d_pct.is_finite()).then(d_pct))
    trends = _trends(pairs, points, cells, higher, metric, 100.0 * min_effect)
    return Scaling(points.select(POINT_COLUMNS),
                   pl.DataFrame(trends, schema=_schema(TREND_COLUMNS)), metric, baseline, notes)


def _not_finite(series: pl.DataFrame, runs: pl.DataFrame, ok: pl.DataFrame,
                cells: pl.DataFrame, metric: str) -> tuple[str, ...]:
    """A sentence per group (declared order) that has no finite point from a run in the
    states read, while one of its runs diverged or logged the metric as NaN or inf (SQLite
    keeps a NaN as NULL): its change cannot be read, and is said so."""
    finite = pl.col("value").is_finite().fill_null(False)
    pts = series.join(runs.select("run_id", "group_key", "status"), on="run_id")
    readable = pts.filter(finite & pl.col("run_id").is_in(ok["run_id"].implode()))
    broken = pl.concat([pts.filter(~finite).select("group_key"),
                        runs.filter(pl.col("status") == DIVERGED).select("group_key")])
    gone = (cells.filter(pl.col("group_key").is_in(broken["group_key"].implode())
                         & ~pl.col("group_key").is_in(readable["group_key"].implode()))
            .sort("_row"))
    out = []
    for g in gone.iter_rows(named=True):
        where = ", ".join([*([f"lr {g['lr']:g}"] if g["lr"] is not None else []),
                           *([str(g["size"])] if g["size"] not in (None, "all") else [])])
        what = "no variant's change can be read against it" if g["is_baseline"] else \
            "no change can be read from it"
        out.append(f"{g['variant']}{f' ({where})' if where else ''}: its runs diverged or "
                   f"logged {metric} only as NaN or inf: {what}")
    return tuple(out)


def _why_empty(series: pl.DataFrame, ok: pl.DataFrame, baseline: str | None, metric: str,
               states: Sequence[str]) -> str:
    """Why no point pairs with the baseline, in one clause (a surface prefixes the sweep)."""
    if baseline is None:
        return "the sweep has no baseline variant to compare with"
    head = (f"no {metric} evaluation point of a variant pairs with the baseline's ({baseline}) "
            "at the same seed and step")
    ended = " or ".join(states)
    if series.height == 0:
        return (f"{head}: no run logged {metric} during training; the runs need it logged "
                f"(train.eval_every) and to have ended {ended}")
    if not series["run_id"].is_in(ok["run_id"].implode()).any():
        return f"{head}: no run that logged it ended {ended}"
    return head


def _schema(cols: Sequence[str]) -> dict[str, pl.DataType]:
    text = {"variant", "size", "group_key", "x", "verdict", "sentence"}
    ints = {"step", "last_step", "tokens", "n", "iso_n", "n_points", "n_seeds", "params_total"}
    return {c: pl.String() if c in text else pl.Int64() if c in ints else pl.Float64()
            for c in cols}


def _empty(cols: Sequence[str]) -> pl.DataFrame:
    return pl.DataFrame(schema=_schema(cols))
