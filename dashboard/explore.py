"""The Explore page's frames (W&B-style slicing of a sweep's runs): every config key that varies,
one row per run with its metric, parallel-coordinate positions per run, and the brushes that
filter runs by ranges on those axes.

Pure polars over what the page reads (the runs' config JSON, their summaries); presentation
only -- group statistics are results_db's (results_db/read/grouping.py).

A brush is kept in data units, so a link (dashboard/urlstate.py) reopens the same selection
after new runs moved the axes' ends: ``{key: [lo, hi]}`` for a numeric axis, ``{key:
[level, ...]}`` for any other.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from dashboard.compare import fmt_axis_value, is_log, polylines
from dashboard.configdiff import flatten

VARIANT = "variant"  # not in the RunSpec: the sweep file's row name, a key like any other
NOT_KEYS = ("name", "sweep")  # differ per run / never: not what a reader slices by
ROW_COLUMNS = ("id", "name", "variant", "seed", "status")  # "seed" is offered as a key too
Brushes = dict[str, list[Any]]
# the parallel chart's room above position 1 and below 0 (y domain [-PAD, 1 + PAD]): a drag
# starts inside the plot, beyond the level it keeps (0.05 left 11 px above the top level)
PAD = 0.1


def _typed(values: list[Any]) -> pl.Series:
    """A key's leaves: numbers as Float64 (booleans and text as text, JSON for the rest)."""
    known = [v for v in values if v is not None]
    if known and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in known):
        return pl.Series(values, dtype=pl.Float64)
    return pl.Series([None if v is None else v if isinstance(v, str) else json.dumps(v)
                      for v in values], dtype=pl.String)


def config_frame(ids: Sequence[int], configs: Sequence[str | Mapping[str, Any] | None]
                 ) -> pl.DataFrame:
    """(id, <every flattened config key whose value is not the same in all runs>): the
    runs' RunSpec JSON ('train.lr', 'model.n_kv_head', 'model.gates.0.position', ...)."""
    flat = [flatten(json.loads(c) if isinstance(c, str) else dict(c or {})) for c in configs]
    keys = sorted(set().union(*flat)) if flat else []
    cols: dict[str, pl.Series] = {}
    for k in keys:
        if k in NOT_KEYS or any(c.startswith(k + ".") for f in flat for c in f):
            continue
        vals = [f.get(k) for f in flat]
        if any(v != vals[0] for v in vals[1:]):
            cols[k] = _typed(vals)
    return pl.DataFrame({"id": pl.Series(list(ids), dtype=pl.Int64), **cols})


def run_table(runs: pl.DataFrame, configs: pl.DataFrame, values: pl.DataFrame,
              metric: str) -> pl.DataFrame:
    """One row per run: ROW_COLUMNS, the varying config keys, and ``metric`` (its summary;
    null where the run has none)."""
    vals = values.filter(pl.col("name") == metric).select(
        pl.col("run_id").cast(pl.Int64).alias("id"), pl.col("value").cast(pl.Float64)
        .alias(metric))
    base = runs.select([pl.col(c) for c in ROW_COLUMNS]).with_columns(pl.col("id")
                                                                      .cast(pl.Int64))
    keys = configs.drop([c for c in configs.columns if c in ROW_COLUMNS and c != "id"])
    return base.join(keys, on="id", how="left").join(vals, on="id", how="left").sort("id")


# the order keys are offered in (and the first MAX_AXES drawn): what a sweep varies on purpose
# first -- the variant, the LR, the gate's dimensions -- and the seed last
KEY_ORDER: tuple[str, ...] = (VARIANT, "train.lr", "model.gates.0.position",
                              "model.gates.0.granularity", "model.gates.0.sharing", "train.",
                              "model.gates.", "model.", "data.", "eval.", "")


def config_keys(table: pl.DataFrame, metric: str) -> list[str]:
    """The keys a page can slice by: the variant and every config key that varies, in
    KEY_ORDER (alphabetical within a prefix), the seed last."""
    keys = [c for c in table.columns if c not in (*ROW_COLUMNS, metric)]
    if table[VARIANT].n_unique() > 1:
        keys = [VARIANT, *keys]
    if table["seed"].n_unique() > 1:
        keys.append("seed")

    def rank(k: str) -> tuple[int, str]:
        if k == "seed":
            return (len(KEY_ORDER), k)
        return (next(i for i, p in enumerate(KEY_ORDER) if k == p or
                     (p.endswith(".") or p == "") and k.startswith(p)), k)
    return sorted(keys, key=rank)


def short_names(keys: Sequence[str]) -> list[str]:
    """Each key as an axis names it: its last dotted part ('train.lr' -> 'lr',
    'model.gates.0.position' -> 'position'), more parts where two would read the same; seven
    full keys side by side overlapped at 1280 px and Vega hid three of them."""
    def tail(k: str, n: int) -> str:
        return ".".join(k.split(".")[-n:])
    depth = dict.fromkeys(keys, 1)
    while True:
        names = [tail(k, depth[k]) for k in keys]
        clash = {k for k, n in zip(keys, names, strict=True) if names.count(n) > 1
                 and tail(k, depth[k]) != k}
        if not clash:
            return names
        for k in clash:
            depth[k] += 1


def default_pair(table: pl.DataFrame) -> list[int]:
    """Two runs worth diffing by default: the first run and the first of another variant
    (two seeds of one variant differ only by their seed)."""
    if table.is_empty():
        return []
    first = table.row(0, named=True)
    other = table.filter(pl.col(VARIANT) != first[VARIANT])
    return [first["id"], *(other["id"].head(1).to_list() or table["id"][1:2].to_list())]


def parallel_runs(table: pl.DataFrame, axes: Sequence[str], kept: Sequence[int]
                  ) -> pl.DataFrame:
    """(id, run, variant, kept, axis, order, pos, label, tick): one polyline per run across
    ``axes`` (config keys, then the metric); ``kept``: whether the brushes keep it."""
    keep = set(kept)
    return polylines(table, axes, {
        "id": table["id"].cast(pl.Int64), "run": table["name"].cast(pl.String),
        "variant": table[VARIANT].cast(pl.String),
        "kept": pl.Series([r in keep for r in table["id"].to_list()], dtype=pl.Boolean)})


def brush_of(table: pl.DataFrame, axis: str, lo: float, hi: float) -> list[Any]:
    """A dragged range on one axis (positions ``lo``..``hi`` in [0, 1]) in data units: the
    numeric range it spans, or the levels inside it."""
    frame = parallel_runs(table, [axis], table["id"].to_list())
    inside = frame.filter(pl.col("pos").is_between(min(lo, hi), max(lo, hi)))
    col = table[axis]
    if col.dtype.is_numeric():
        span = _span(col, axis)
        if span is None:
            return []
        a, b = span
        def unscale(p: float) -> float:
            v = a + (b - a) * p
            return 10 ** v if is_log(axis) and _positive(col) else v
        return [unscale(min(lo, hi)), unscale(max(lo, hi))]
    return sorted(set(inside["label"].to_list()))


def _positive(col: pl.Series) -> bool:
    return all(v > 0 for v in col.drop_nulls().to_list())


def _span(col: pl.Series, axis: str) -> tuple[float, float] | None:
    vals = [float(v) for v in col.drop_nulls().to_list() if math.isfinite(v)]
    if not vals:
        return None
    if is_log(axis) and all(v > 0 for v in vals):
        vals = [math.log10(v) for v in vals]
    return min(vals), max(vals)


def brush_fits(table: pl.DataFrame, brushes: Brushes) -> bool:
    """Whether ``brushes`` (a link's, already a ``{str: [scalar, ...]}``) is a selection on
    ``table``: each key a column, a numeric one with two numbers, any other with its levels
    as text."""
    for axis, sel in brushes.items():
        if axis not in table.columns or not sel:
            return False
        if table[axis].dtype.is_numeric():
            if len(sel) != 2 or not all(isinstance(v, (int, float)) for v in sel):
                return False
        elif not all(isinstance(v, str) for v in sel):
            return False
    return True


def brushed(table: pl.DataFrame, brushes: Brushes) -> list[int]:
    """The ids of the runs every brush keeps (a numeric axis: lo <= value <= hi; any other:
    its value among the levels; '–' keeps the runs without a value)."""
    keep = pl.lit(True)
    for axis, sel in brushes.items():
        if axis not in table.columns or not sel:
            continue
        if table[axis].dtype.is_numeric():
            lo, hi = float(sel[0]), float(sel[1])
            tol = 1e-9 * max(abs(lo), abs(hi), 1e-300)  # the ends of a drag are inclusive
            keep = keep & pl.col(axis).is_between(lo - tol, hi + tol).fill_null(False)
        else:
            keep = keep & pl.col(axis).cast(pl.String).fill_null("–").is_in(
                [str(s) for s in sel])
    return table.filter(keep)["id"].to_list()


def brush_text(brushes: Brushes, table: pl.DataFrame) -> str:
    """'train.lr in [1e-2, 1e-1]; variant in {baseline, sdpa_elementwise}'."""
    parts = []
    for axis, sel in brushes.items():
        if axis in table.columns and table[axis].dtype.is_numeric():
            parts.append(f"{axis} in [{fmt_axis_value(sel[0], axis)}, "
                         f"{fmt_axis_value(sel[1], axis)}]")
        else:
            parts.append(f"{axis} in {{{', '.join(map(str, sel))}}}")
    return "; ".join(parts)


def fmt_key(v: Any, key: str) -> str:
    """A numeric config value as an axis writes it ('1e-2' for a learning rate, '4', ...)."""
    return "–" if v is None else fmt_axis_value(float(v), key)


def _scaled(v: float, col: pl.Series, axis: str) -> float:
    return math.log10(v) if is_log(axis) and _positive(col) and v > 0 else v


def brush_rects(table: pl.DataFrame, axes: Sequence[str], brushes: Brushes) -> pl.DataFrame:
    """(x0, x1, y0, y1): the brushes in force as boxes on the parallel chart (x in axis
    index units, y in positions), so the selection stays visible after the page reruns."""
    rows = []
    for i, axis in enumerate(axes):
        sel = brushes.get(axis)
        if not sel or axis not in table.columns:
            continue
        col = table[axis]
        if col.dtype.is_numeric():
            span = _span(col, axis)
            if span is None:
                continue
            a, b = span
            width = (b - a) or 1.0
            ys = [0.5 if b == a else (_scaled(float(v), col, axis) - a) / width
                  for v in sel[:2]]
        else:
            frame = parallel_runs(table, [axis], [])
            ys = frame.filter(pl.col("label").is_in([str(s) for s in sel]))["pos"].to_list()
            if not ys:
                continue
        lo, hi = max(min(ys) - 0.03, -PAD), min(max(ys) + 0.03, 1 + PAD)
        rows.append({"x0": i - 0.12, "x1": i + 0.12, "y0": lo, "y1": hi})
    return pl.DataFrame(rows, schema={c: pl.Float64 for c in ("x0", "x1", "y0", "y1")})
