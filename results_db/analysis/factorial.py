"""The 2x2 factorial of two binary factors of a sweep: each cell against the baseline, the two
main effects and their interaction, per seed, with intervals and verdicts.

A factor is data (``Factor``): a name, the run dimension it reads, the value of it that is
"on" (off: the dimension unset, NULL; any other value is no level of the 2x2) and the columns
its level brings along. A ``Design`` is two factors; ``DESIGNS`` the ones a sweep is searched
for, in order. The level is chosen in data on purpose: in sweeps/nsa.yaml "sparse on" is NSA
with equal branch weights (no gate of its own), so sparse x gated asks about the G1 gate alone;
nsa_gated and nsa_learned, NSA's branch-gate variants, are leaderboard rows but no cells.

The four cells, per context (one baseline group: the baseline at one point of the sweep's
axes, its LR and any other swept axis, as compare.match_axes holds them fixed):

- off/off is the baseline group (baseline.py); a baseline with either factor set: no 2x2;
- each other cell is THE group compared with that baseline group whose two factor columns
  have the cell's levels and whose every other dimension equals the baseline's (a factor's
  own columns aside: a G1 gate brings its granularity, activation, ...). No such group: the
  cell is missing; several: the cell is ambiguous. Either way no 2x2 there, said in words.

Numbers:

- a cell's delta % vs the baseline, its interval and verdict are the leaderboard's row
  (compare.py: every seed of the cell, paired or Welch, the leaderboard's multiplicity rule);
- the contrasts read the seeds with a value in all four cells (a seed without one in some
  cell -- not run there, failed, diverged -- is dropped and counted). With y_ab the value of
  the cell with A at a and B at b, per seed:
      main effect of A   (y10 - y00 + y11 - y01) / 2   A's change averaged over B's levels
      main effect of B   (y01 - y00 + y11 - y10) / 2
      interaction        y11 - y10 - y01 + y00          A's change with B on minus with B off
  each as % of |mean y00 over those seeds|, with the Student-t interval of its mean over the
  seeds (df n - 1) at Bonferroni's level over the 3 contrasts (multiplicity.row_level: each
  at 1 - alpha / 3, so the three verdicts together err with probability <= alpha);
- verdict: verdict.interval_verdict with the margin +-min_effect x |baseline mean|
  (better / worse only when the interval excludes 0, within noise only inside the margin,
  else inconclusive); one seed: "n = 1"; none: "no data". An interaction "better" says the
  two together improve the metric by more than their main effects add up to.

These are fixed-n t intervals. In an adaptive (``decide:``) sweep the seeds of a row were added
after looking; its anytime-valid verdicts (sequential.py) remain the rows' own answer, and
the contrasts read the seeds that ran as if their number had been fixed in advance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from contract.analysis_defaults import FAMILY_ERROR, MIN_EFFECT
from contract.gate_dims import GATE_FIELDS
from contract.gate_positions import SDPA_OUTPUT
from results_db.analysis.compare import match_axes, matched_groups
from results_db.analysis.labels import lr_text
from results_db.analysis.multiplicity import BONFERRONI, row_level, rule_text
from results_db.analysis.stats import describe, t_quantile
from results_db.analysis.summary import board_rule
from results_db.analysis.verdict import BETTER, WORSE, interval_verdict
from results_db.schema.vocab import DIMENSIONS, RESULT_STATES

ON, OFF = "on", "off"
NO_DATA, ONE_SEED = "no data", "n = 1"  # results_db.schema.vocab.VERDICTS
MAIN, INTERACTION = "main effect", "interaction"
N_CONTRASTS = 3  # two main effects and the interaction: the Bonferroni family


@dataclass(frozen=True)
class Factor:
    name: str  # what tables and sentences call it
    column: str  # the run dimension it reads (contract/dimensions.py)
    on: str  # the dimension's value that is "on"; NULL is "off"
    owns: tuple[str, ...]  # columns its level brings along: not held equal across the cells

    def text(self) -> str:
        return f"{self.name} ({self.column} = {self.on})"

    def is_level(self, on: bool) -> pl.Expr:
        col = pl.col(self.column)
        return col.cast(pl.String) == self.on if on else col.is_null()


@dataclass(frozen=True)
class Design:
    a: Factor
    b: Factor

    @property
    def name(self) -> str:
        return f"{self.a.name} x {self.b.name}"

    def text(self) -> str:
        return f"{self.a.text()} x {self.b.text()}"

    def cell_text(self, a_on: bool, b_on: bool) -> str:
        return f"{self.a.name} {ON if a_on else OFF}, {self.b.name} {ON if b_on else OFF}"


# Native Sparse Attention without its own gate x the paper's G1 gate (sweeps/nsa.yaml)
SPARSE = Factor("sparse", "nsa", "equal", ("nsa",))
GATED = Factor("gated", "gate_position", SDPA_OUTPUT,
               tuple(f"gate_{f}" for f in ("position", *GATE_FIELDS)))
SPARSE_X_GATED = Design(SPARSE, GATED)
DESIGNS: tuple[Design, ...] = (SPARSE_X_GATED,)

CELLS: tuple[tuple[bool, bool], ...] = ((False, False), (True, False), (False, True),
                                        (True, True))
CELL_SCHEMA: dict[str, Any] = {
    "context": pl.String, "lr": pl.Float64, "a": pl.String, "b": pl.String,
    "variant": pl.String, "n": pl.Int64, "delta_pct": pl.Float64, "ci_low_pct": pl.Float64,
    "ci_high_pct": pl.Float64, "ci_level": pl.Float64, "ci_method": pl.String,
    "verdict": pl.String}
EFFECT_SCHEMA: dict[str, Any] = {
    "context": pl.String, "lr": pl.Float64, "contrast": pl.String, "kind": pl.String,
    "n_seeds": pl.Int64, "seeds_dropped": pl.Int64, "estimate_pct": pl.Float64,
    "ci_low_pct": pl.Float64, "ci_high_pct": pl.Float64, "ci_level": pl.Float64,
    "df": pl.Float64, "verdict": pl.String}


@dataclass(frozen=True)
class Factorial:
    """The 2x2 of ``design`` in ``sweep`` on ``metric``: ``cells`` (CELL_SCHEMA; ``a`` / ``b``
    the two factors' levels, on | off) and ``effects`` (EFFECT_SCHEMA) per context, or
    ``reason``, why the sweep has none (both frames empty then)."""

    sweep: str
    metric: str
    design: Design
    baseline: str | None
    cells: pl.DataFrame
    effects: pl.DataFrame
    rule: str  # the contrasts' multiplicity rule in words
    cell_rule: str  # the cells': the leaderboard's (summary.board_rule)
    reason: str | None = None

    @property
    def found(self) -> bool:
        return self.reason is None

    def sentence(self) -> str:
        """What is decided, in words that follow the intervals (module docstring)."""
        if self.reason is not None:
            return f"Sweep {self.sweep} has no 2x2 of {self.design.text()}: {self.reason}."
        return factorial_sentence(self)

    def table(self) -> pl.DataFrame:
        """The cells, then the contrasts, in one frame (the factor columns named by the
        factors): row (cell | main effect | interaction), name (the cell's
        variant, the contrast's factor), n (seeds: the cell's, or those in every cell),
        estimate_pct (the cell's delta_pct, the contrast's estimate) and its CI."""
        cells = self.cells.select(
            "context", "lr", pl.lit("cell").alias("row"), pl.col("variant").alias("name"),
            "a", "b", "n", pl.col("delta_pct").alias("estimate_pct"), "ci_low_pct",
            "ci_high_pct", "ci_level", "verdict", "ci_method",
            pl.lit(None, pl.Int64).alias("seeds_dropped"))
        effects = self.effects.select(
            "context", "lr", pl.col("kind").alias("row"), pl.col("contrast").alias("name"),
            pl.lit(None, pl.String).alias("a"), pl.lit(None, pl.String).alias("b"),
            pl.col("n_seeds").alias("n"), "estimate_pct", "ci_low_pct", "ci_high_pct",
            "ci_level", "verdict", pl.lit("paired").alias("ci_method"), "seeds_dropped")
        return pl.concat([cells, effects]).rename(
            {"a": self.design.a.name, "b": self.design.b.name})


def _same(groups: pl.DataFrame, base: dict[str, Any], cols: Sequence[str]) -> pl.Expr:
    """Rows whose ``cols`` equal the baseline row's (null equals null)."""
    same = pl.lit(True)
    for c in cols:
        v = base[c]
        same = same & (pl.col(c).is_null() if v is None else pl.col(c).eq_missing(v))
    return same


def _cells(groups: pl.DataFrame, base: dict[str, Any],
           design: Design) -> dict[tuple[bool, bool], str] | str:
    """The group_key of each cell beside the baseline group ``base``, or why there is none."""
    for f in (design.a, design.b):
        if base.get(f.column) is not None:
            return (f"its baseline {base['variant']!r} has {f.column} = {base[f.column]} "
                    f"(off means {f.column} unset)")
    owned = {*design.a.owns, *design.b.owns}
    held = [c for c in DIMENSIONS if c in groups.columns and c not in owned]
    peers = groups.filter((pl.col("base_key") == base["group_key"]) & ~pl.col("is_baseline")
                          & _same(groups, base, held))
    keys = {(False, False): str(base["group_key"])}
    for a_on, b_on in CELLS[1:]:
        hit = peers.filter(design.a.is_level(a_on) & design.b.is_level(b_on))
        where = f"{design.cell_text(a_on, b_on)} beside baseline {base['variant']!r}"
        if hit.height == 0:
            return f"no variant is {where}"
        if hit.height > 1:
            return f"{hit.height} variants are {where} ({', '.join(hit['variant'])})"
        keys[(a_on, b_on)] = str(hit["group_key"][0])
    return keys


def _per_seed(values: pl.DataFrame, keys: dict[tuple[bool, bool], str]
              ) -> tuple[dict[tuple[bool, bool], dict[int, float]], list[int], int]:
    """Each cell's value per seed (a seed run twice in a cell: their mean), the seeds with a
    value in every cell (sorted) and how many seeds some cell has no value for (not run,
    failed, diverged)."""
    by: dict[tuple[bool, bool], dict[int, float]] = {}
    for cell, key in keys.items():
        rows = values.filter(pl.col("group_key") == key).group_by("seed").agg(
            pl.col("value").mean())
        by[cell] = {int(s): float(v) for s, v in rows.iter_rows()}
    seen = set().union(*(set(v) for v in by.values()))
    common = sorted(set.intersection(*(set(v) for v in by.values())))
    return by, common, len(seen) - len(common)


def _contrast(diffs: list[float], base_mean: float, level: float, min_effect: float,
              higher: bool) -> dict[str, Any]:
    """estimate_pct, the interval's bounds in %, df and verdict of a per-seed contrast."""
    d = describe(diffs)
    pct = (lambda x: 100.0 * x / abs(base_mean)) if base_mean != 0 else (lambda x: None)
    if d.mean is None:
        return {"estimate_pct": None, "ci_low_pct": None, "ci_high_pct": None, "df": None,
                "verdict": NO_DATA}
    if d.std is None:
        return {"estimate_pct": pct(d.mean), "ci_low_pct": None, "ci_high_pct": None,
                "df": None, "verdict": ONE_SEED}
    half = t_quantile(0.5 + level / 2, d.n - 1) * d.std / math.sqrt(d.n)
    low, high = d.mean - half, d.mean + half
    margin = min_effect * abs(base_mean) if base_mean != 0 else None
    return {"estimate_pct": pct(d.mean), "ci_low_pct": pct(low), "ci_high_pct": pct(high),
            "df": float(d.n - 1),
            "verdict": interval_verdict(low, high, margin, higher_is_better=higher)}


def _effects(design: Design, y: dict[tuple[bool, bool], dict[int, float]], seeds: list[int],
             level: float, min_effect: float, higher: bool) -> list[dict[str, Any]]:
    """The rows of the two main effects and the interaction over the paired ``seeds``."""
    per_seed = [tuple(y[c][s] for c in CELLS) for s in seeds]  # (y00, y10, y01, y11) each
    contrasts = (
        (design.a.name, MAIN, [(y10 - y00 + y11 - y01) / 2 for y00, y10, y01, y11 in per_seed]),
        (design.b.name, MAIN, [(y01 - y00 + y11 - y10) / 2 for y00, y10, y01, y11 in per_seed]),
        (design.name, INTERACTION, [y11 - y10 - y01 + y00 for y00, y10, y01, y11 in per_seed]))
    base_mean = sum(v[0] for v in per_seed) / len(per_seed) if per_seed else 0.0
    rows = [{"contrast": name, "kind": kind, "n_seeds": len(seeds),
             **_contrast(diffs, base_mean, level, min_effect, higher)}
            for name, kind, diffs in contrasts]
    return [{**r, "ci_level": level if r["ci_low_pct"] is not None else None} for r in rows]


def _cell_rows(board: pl.DataFrame,
               keys: dict[tuple[bool, bool], str]) -> list[dict[str, Any]]:
    """The leaderboard's row of each cell, with the cell's two levels."""
    rows = []
    for (a_on, b_on), key in keys.items():
        row = board.filter(pl.col("group_key") == key).row(0, named=True)
        rows.append({"a": ON if a_on else OFF, "b": ON if b_on else OFF,
                     **{c: row.get(c) for c in CELL_SCHEMA if c not in ("context", "a", "b")}})
    return rows


def factorial(board: pl.DataFrame, values: pl.DataFrame, info: pl.DataFrame,
              baseline: str | None, sweep: str, metric: str, higher: bool, *,
              designs: Sequence[Design] = DESIGNS, min_effect: float = MIN_EFFECT,
              family_error: float = FAMILY_ERROR,
              states: Sequence[str] = RESULT_STATES) -> Factorial:
    """The first of ``designs`` the sweep has as a 2x2 in some context, else the first design
    with the reason it is missing. ``board``: compare.compare() over the sweep (the cells'
    numbers); ``values``: its runs (run_id, group_key, seed, status, value); ``info``: the
    groups' labels (frames.group_info)."""
    level = row_level(BONFERRONI, family_error, N_CONTRASTS)
    rule = rule_text(BONFERRONI, family_error, N_CONTRASTS, what="contrasts")
    ok = values.filter(pl.col("status").is_in(list(states))
                       & pl.col("value").is_finite().fill_null(False))
    groups = matched_groups(values, info, baseline)
    bases = groups.filter(pl.col("is_baseline")) if groups.height else groups
    axes = match_axes(groups, baseline) if groups.height else []
    reasons: list[str] = []
    for design in designs:
        cells: list[dict[str, Any]] = []
        effects: list[dict[str, Any]] = []
        for base in bases.iter_rows(named=True):
            keys = _cells(groups, base, design)
            if isinstance(keys, str):
                reasons.append(keys)
                continue
            y, seeds, dropped = _per_seed(ok, keys)
            where = {"context": ", ".join(_axis_text(a, base.get(a)) for a in axes),
                     "lr": base.get("lr")}
            cells += [{**where, **r} for r in _cell_rows(board, keys)]
            effects += [{**where, **r, "seeds_dropped": dropped}
                        for r in _effects(design, y, seeds, level, min_effect, higher)]
        if cells:
            return Factorial(sweep, metric, design, baseline,
                             pl.DataFrame(cells, schema=CELL_SCHEMA),
                             pl.DataFrame(effects, schema=EFFECT_SCHEMA).select(
                                 list(EFFECT_SCHEMA)), rule, board_rule(board))
    reason = reasons[0] if reasons else (
        "no baseline variant" if baseline is None else f"no {metric} value of the baseline")
    return Factorial(sweep, metric, designs[0], baseline, pl.DataFrame(schema=CELL_SCHEMA),
                     pl.DataFrame(schema=EFFECT_SCHEMA), rule, board_rule(board), reason)


def _axis_text(axis: str, value: Any) -> str:
    return f"lr {lr_text(value)}" if axis == "lr" else f"{axis} {value}"


def _signed(v: float | None) -> str:
    return "?" if v is None else f"{v:+.2f}"


def _said(row: dict[str, Any]) -> str:
    """'sparse worse +3.10 % [+1.20, +5.00]' ('n = 1': no interval; 'no data': no number)."""
    what = f"{row['contrast']} interaction" if row["kind"] == INTERACTION else row["contrast"]
    text = f"{what} {row['verdict']}"
    if row["estimate_pct"] is not None:
        text += f" {_signed(row['estimate_pct'])} %"
    if row["ci_low_pct"] is not None:
        text += f" [{_signed(row['ci_low_pct'])}, {_signed(row['ci_high_pct'])}]"
    if row["kind"] == INTERACTION and row["verdict"] in (BETTER, WORSE):
        text += f" (the two together do {row['verdict']} than their separate effects add up to)"
    return text


def factorial_sentence(f: Factorial) -> str:
    """"Sweep s, 2x2 sparse (nsa = equal) x gated (gate_position = G1) on val/ppl vs
    baseline 'baseline', 4 seeds in every cell (1 dropped: no value in some cell): sparse
    worse +3.10 % [+1.20, +5.00]; gated ...; sparse x gated interaction inconclusive ...
    [Bonferroni over the 3 contrasts: ...]." One clause per context where the sweep has
    several."""
    parts = []
    for ctx in dict.fromkeys(f.effects["context"].to_list()):
        rows = [r for r in f.effects.iter_rows(named=True) if r["context"] == ctx]
        n, dropped = rows[0]["n_seeds"], rows[0]["seeds_dropped"]
        seeds = f"{n} {'seed' if n == 1 else 'seeds'} in every cell"
        if dropped:
            seeds += f" ({dropped} dropped: no value in some cell)"
        body = f"{seeds}: " + "; ".join(_said(r) for r in rows)
        parts.append(f"at {ctx}, {body}" if ctx and len(set(f.effects["context"])) > 1
                     else body)
    return (f"Sweep {f.sweep}, 2x2 {f.design.text()} on {f.metric} vs baseline "
            f"{f.baseline!r}, " + "; ".join(parts) + f" [{f.rule}].")
