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

Numbers. The cells are always the leaderboard's rows, taken from its own path (api.py's
``_board``), so a cell says exactly what the leaderboard says of that row. The contrasts read
the seeds with a value in all four cells (a seed without one in some cell -- not run there,
failed, diverged; with a relative decide: margin, y00 = 0 -- is dropped and counted). With
y_ab the value of the cell with A at a and B at b, per seed:
    main effect of A   (y10 - y00 + y11 - y01) / 2   A's change averaged over B's levels
    main effect of B   (y01 - y00 + y11 - y10) / 2
    interaction        y11 - y10 - y01 + y00          A's change with B on minus with B off
each estimated as the mean over those seeds in % of |mean y00| (compare.pct_of_base's rule),
at Bonferroni's level over the 3 contrasts (each at 1 - alpha / 3, so the three verdicts
together err with probability <= alpha). An interaction "better" says the two together
improve the metric by more than their main effects add up to. How the interval is read
depends on how the seeds were chosen:

- a fixed-seed sweep: the cells are compare.py's rows (every seed of the cell, paired or
  Welch, the leaderboard's multiplicity rule); each contrast has the Student-t interval of its
  mean (df n - 1) at multiplicity.row_level(BONFERRONI, family_error, 3), and
  verdict.interval_verdict with the margin +-min_effect x |baseline mean| (better / worse
  only when the interval excludes 0, within noise only inside the margin, else
  inconclusive); one seed: "n = 1"; none: "no data".
- an adaptive sweep (``decide:`` on the metric; the caller passes its DecideRule): seeds were
  added after looking, so a fixed-n interval would not hold its level. The cells are the
  leaderboard's anytime-valid rows (sequential.onto_board). Each contrast is read as the rows
  are (sequential.read_rows): its per-seed values in the order the rows read their pairs (a
  seed at the latest recorded look that read one of its cells' pairs; seeds no look recorded
  after those, by seed), relative to that seed's y00 when the rule's margin is relative, with
  the rule's confidence sequence (confseq.read with its g, or signcs.read for test: sign) at
  1 - error_rate / 3, and confseq.verdicts with the rule's margin: better / worse / within
  noise, "undecided" while some cell still gets seeds, "inconclusive" once none will (each
  decided or at max_seeds); none: "no data". The three verdicts together err with
  probability <= the rule's error_rate whatever the allocation did after looking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from contract.analysis_defaults import FAMILY_ERROR, MIN_EFFECT
from contract.gate_dims import GATE_FIELDS
from contract.gate_positions import SDPA_OUTPUT
from results_db.analysis import confseq, signcs
from results_db.analysis.compare import match_axes, matched_groups
from results_db.analysis.decide_rule import DecideRule
from results_db.analysis.labels import lr_text
from results_db.analysis.multiplicity import BONFERRONI, row_level, rule_text
from results_db.analysis.sequential import ANYTIME, interval_words
from results_db.analysis.stats import describe, t_quantile
from results_db.analysis.summary import board_rule
from results_db.analysis.verdict import BETTER, WORSE, interval_verdict
from results_db.schema.vocab import DIMENSIONS, NEEDS_SEEDS, RESULT_STATES, verdict_kind

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
    "ci_method": pl.String, "df": pl.Float64, "verdict": pl.String}


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
    rule: str  # the contrasts' interval and multiplicity rule in words
    cell_rule: str  # the cells': the leaderboard's (summary.board_rule; anytime-valid or not)
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
            "ci_level", "verdict", "ci_method", "seeds_dropped")
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


_Read = Callable[[list[float], list[float]], dict[str, Any]]  # (contrast, y00) per seed -> row
_OPEN = NEEDS_SEEDS.format(k="k")  # verdict_kind of an open row's "needs >= 6 seeds"
_LATER = 1 << 30  # a pair no look recorded yet: read after the recorded ones (as read_rows)


def _t_read(level: float, min_effect: float, higher: bool) -> _Read:
    """A fixed-seed sweep's contrast: the Student-t interval of its mean (module docstring)."""

    def read(diffs: list[float], y00: list[float]) -> dict[str, Any]:
        d = describe(diffs)
        base_mean = sum(y00) / len(y00) if y00 else 0.0
        pct = (lambda x: 100.0 * x / abs(base_mean)) if base_mean != 0 else (lambda x: None)
        out: dict[str, Any] = {"estimate_pct": None, "ci_low_pct": None, "ci_high_pct": None,
                               "ci_level": None, "ci_method": "paired", "df": None}
        if d.mean is None:
            return {**out, "verdict": NO_DATA}
        if d.std is None:
            return {**out, "estimate_pct": pct(d.mean), "verdict": ONE_SEED}
        half = t_quantile(0.5 + level / 2, d.n - 1) * d.std / math.sqrt(d.n)
        low, high = d.mean - half, d.mean + half
        margin = min_effect * abs(base_mean) if base_mean != 0 else None
        return {**out, "estimate_pct": pct(d.mean), "ci_low_pct": pct(low),
                "ci_high_pct": pct(high), "ci_level": level if base_mean != 0 else None,
                "df": float(d.n - 1),
                "verdict": interval_verdict(low, high, margin, higher_is_better=higher)}

    return read


def _anytime_read(rule: DecideRule, closed: bool) -> _Read:
    """An adaptive sweep's contrast, read by its decide rule as the rows are (module
    docstring); ``closed``: no cell gets more seeds, so an open interval is inconclusive."""
    alpha = 1.0 - row_level(BONFERRONI, rule.error_rate, N_CONTRASTS)

    def read(diffs: list[float], y00: list[float]) -> dict[str, Any]:
        out: dict[str, Any] = {"estimate_pct": None, "ci_low_pct": None, "ci_high_pct": None,
                               "ci_level": None, "ci_method": ANYTIME, "df": None}
        if not diffs:
            return {**out, "verdict": NO_DATA}
        base_mean = sum(y00) / len(y00)
        pct = 100.0 / abs(base_mean) if base_mean else None  # of |mean y00|, compare's rule
        # the statistic the interval is of: relative to each seed's y00 with a relative margin
        stat = [c / abs(b) for c, b in zip(diffs, y00, strict=True)] if rule.relative else diffs
        r = (signcs.read(stat, alpha) if rule.test == "sign"
             else confseq.read(stat, alpha, rule.g))
        verdict = confseq.verdicts(np.array(r.low), np.array(r.high), rule.margin,
                                   rule.higher_is_better, at_cap=closed).item()
        to_pct = 100.0 if rule.relative else pct  # the interval's units -> %
        low = high = level = None
        if to_pct is not None and math.isfinite(r.low) and math.isfinite(r.high):
            low, high, level = r.low * to_pct, r.high * to_pct, 1.0 - alpha
        return {**out, "estimate_pct": None if pct is None else pct * sum(diffs) / len(diffs),
                "ci_low_pct": low, "ci_high_pct": high, "ci_level": level,
                "verdict": str(verdict)}

    return read


def _read_order(y: dict[tuple[bool, bool], dict[int, float]], seeds: list[int],
                keys: dict[tuple[bool, bool], str], rule: DecideRule,
                order: dict[tuple[str, int], int]) -> list[int]:
    """The seeds in the order the rows read their pairs: by the latest look that read one of
    the seed's three pairs (db.pair_order; unrecorded: after every recorded one), then by
    seed; with a relative margin, none whose y00 is 0 (no relative change)."""
    rows = [k for cell, k in keys.items() if cell != CELLS[0]]
    keep = [s for s in seeds if not (rule.relative and y[CELLS[0]][s] == 0)]
    return sorted(keep, key=lambda s: (max(order.get((k, s), _LATER) for k in rows), s))


def _closed(board: pl.DataFrame, keys: dict[tuple[bool, bool], str]) -> bool:
    """No cell gets more seeds: none of their rows is open ("needs >= k seeds", onto_board's
    word for an undecided row below its cap)."""
    verdicts = board.filter(pl.col("group_key").is_in(list(keys.values())))["verdict"]
    return not any(verdict_kind(v) == _OPEN for v in verdicts.to_list())


def _effects(design: Design, y: dict[tuple[bool, bool], dict[int, float]], seeds: list[int],
             read: _Read) -> list[dict[str, Any]]:
    """The rows of the two main effects and the interaction over ``seeds`` (in reading
    order)."""
    per_seed = [tuple(y[c][s] for c in CELLS) for s in seeds]  # (y00, y10, y01, y11) each
    contrasts = (
        (design.a.name, MAIN, [(y10 - y00 + y11 - y01) / 2 for y00, y10, y01, y11 in per_seed]),
        (design.b.name, MAIN, [(y01 - y00 + y11 - y10) / 2 for y00, y10, y01, y11 in per_seed]),
        (design.name, INTERACTION, [y11 - y10 - y01 + y00 for y00, y10, y01, y11 in per_seed]))
    y00 = [v[0] for v in per_seed]
    return [{"contrast": name, "kind": kind, "n_seeds": len(seeds), **read(diffs, y00)}
            for name, kind, diffs in contrasts]


def _cell_rows(board: pl.DataFrame,
               keys: dict[tuple[bool, bool], str]) -> list[dict[str, Any]]:
    """The leaderboard's row of each cell, with the cell's two levels."""
    rows = []
    for (a_on, b_on), key in keys.items():
        row = board.filter(pl.col("group_key") == key).row(0, named=True)
        rows.append({"a": ON if a_on else OFF, "b": ON if b_on else OFF,
                     **{c: row.get(c) for c in CELL_SCHEMA if c not in ("context", "a", "b")}})
    return rows


def _rules(board: pl.DataFrame, decide: DecideRule | None, family_error: float
           ) -> tuple[str, str]:
    """The contrasts' rule and the cells' in words, naming anytime-valid intervals as such."""
    if decide is None:
        return (rule_text(BONFERRONI, family_error, N_CONTRASTS, what="contrasts"),
                board_rule(board))
    said = interval_words(decide)  # "anytime-valid mixture-t intervals"
    return (f"{said}, {rule_text(BONFERRONI, decide.error_rate, N_CONTRASTS, 'contrasts')}",
            f"{said}, {board_rule(board)}")


def factorial(board: pl.DataFrame, values: pl.DataFrame, info: pl.DataFrame,
              baseline: str | None, sweep: str, metric: str, higher: bool, *,
              designs: Sequence[Design] = DESIGNS, min_effect: float = MIN_EFFECT,
              family_error: float = FAMILY_ERROR, states: Sequence[str] = RESULT_STATES,
              decide: DecideRule | None = None,
              order: dict[tuple[str, int], int] | None = None) -> Factorial:
    """The first of ``designs`` the sweep has as a 2x2 in some context, else the first design
    with the reason it is missing. ``board``: the sweep's leaderboard (the cells' numbers;
    read by ``decide`` when it is given); ``values``: its runs (run_id, group_key, seed,
    status, value); ``info``: the groups' labels (frames.group_info). ``decide``: the
    sweep's decide rule on ``metric`` (adaptive: its contrasts read by it, ``min_effect`` and
    ``family_error`` unused), ``order``: (group_key, seed) -> the look that read the pair
    (db.pair_order)."""
    t_read = _t_read(row_level(BONFERRONI, family_error, N_CONTRASTS), min_effect, higher)
    rule, cell_rule = _rules(board, decide, family_error)
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
            if decide is None:
                read = t_read
            else:
                common = len(seeds)
                seeds = _read_order(y, seeds, keys, decide, order or {})
                dropped += common - len(seeds)
                read = _anytime_read(decide, _closed(board, keys))
            where = {"context": ", ".join(_axis_text(a, base.get(a)) for a in axes),
                     "lr": base.get("lr")}
            cells += [{**where, **r} for r in _cell_rows(board, keys)]
            effects += [{**where, **r, "seeds_dropped": dropped}
                        for r in _effects(design, y, seeds, read)]
        if cells:
            return Factorial(sweep, metric, design, baseline,
                             pl.DataFrame(cells, schema=CELL_SCHEMA),
                             pl.DataFrame(effects, schema=EFFECT_SCHEMA).select(
                                 list(EFFECT_SCHEMA)), rule, cell_rule)
    reason = reasons[0] if reasons else (
        "no baseline variant" if baseline is None else f"no {metric} value of the baseline")
    return Factorial(sweep, metric, designs[0], baseline, pl.DataFrame(schema=CELL_SCHEMA),
                     pl.DataFrame(schema=EFFECT_SCHEMA), rule, cell_rule, reason)


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
