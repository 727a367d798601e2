"""The metric rollup: per (run, name, 256-step block) the points a downsampled curve keeps.

``metric_rollup`` (migration 0003_rollup) holds, for every block of ``BLOCK`` steps
(block = step // BLOCK) of every series: the point count, the first step, the arg-min and the
arg-max among its numbers (ties: the earliest step), its last point (its value may be NULL)
and its first NULL step. A downsampled read whose buckets span >= BLOCK steps then reads these
rows (~1/256 of the points) instead of the raw ``metrics`` (results_db/read/downsample.py), so a
curve's cost stops growing with its length: 100 runs x 100k steps is ~39k rollup rows.

Written at ingest: ``log_metrics`` calls ``update`` in its own transaction, so the rollup never
disagrees with ``metrics``. Training logs forward, so most batches only append to a block and
the block's row is merged with the batch's summary (no re-read); a batch that rewrites or
inserts before a block's last step (a retried attempt re-logging steps) re-reads that block.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from results_db.write.multirow import execute_rows

BLOCK = 256
TABLE = "metric_rollup"
COLUMNS: tuple[str, ...] = ("n", "first_step", "min_step", "min_value", "max_step",
                            "max_value", "last_step", "last_value", "nan_step")


@dataclass(frozen=True)
class Block:
    """One block's summary (steps absolute; values None where the block has no number)."""

    n: int
    first_step: int
    min_step: int | None
    min_value: float | None
    max_step: int | None
    max_value: float | None
    last_step: int
    last_value: float | None
    nan_step: int | None


def summarize(points: Sequence[tuple[int, float | None]]) -> Block:
    """The Block of ``points`` ((step, value), sorted by step, steps unique, non-empty)."""
    mn: tuple[int, float] | None = None
    mx: tuple[int, float] | None = None
    nan: int | None = None
    for step, value in points:
        if value is None:
            nan = step if nan is None else nan
        else:  # strict comparisons: ties keep the earliest step
            if mn is None or value < mn[1]:
                mn = (step, value)
            if mx is None or value > mx[1]:
                mx = (step, value)
    return Block(len(points), points[0][0], mn and mn[0], mn and mn[1], mx and mx[0],
                 mx and mx[1], points[-1][0], points[-1][1], nan)


def merge(old: Block, new: Block) -> Block:
    """``old`` followed by ``new`` (every step of ``new`` after ``old.last_step``)."""
    mn = (old.min_step, old.min_value)
    if new.min_value is not None and (old.min_value is None or new.min_value < old.min_value):
        mn = (new.min_step, new.min_value)
    mx = (old.max_step, old.max_value)
    if new.max_value is not None and (old.max_value is None or new.max_value > old.max_value):
        mx = (new.max_step, new.max_value)
    nan = old.nan_step if old.nan_step is not None else new.nan_step
    return Block(old.n + new.n, old.first_step, *mn, *mx, new.last_step, new.last_value, nan)


def _by_block(rows: Iterable[tuple[Any, Any, int, str, float | None]]
              ) -> dict[tuple[str, int], list[tuple[int, float | None]]]:
    """log_metrics rows (run_id, attempt_id, step, name, value) -> {(name, block): sorted
    unique (step, value)}; a step logged twice keeps its last value, as the upsert does."""
    last: dict[tuple[str, int], dict[int, float | None]] = defaultdict(dict)
    for _, _, step, name, value in rows:
        last[(name, step // BLOCK)][step] = value
    return {k: sorted(v.items()) for k, v in last.items()}


def _ph(conn: Any) -> str:
    return "?" if conn.dialect.name == "sqlite" else "%s"


def _existing(conn: Any, run_id: int, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int],
                                                                                  Block]:
    """The stored rows of the touched blocks (one range read over the run's blocks)."""
    p = _ph(conn)
    lo, hi = min(b for _, b in keys), max(b for _, b in keys)
    rows = conn.exec_driver_sql(
        f"SELECT name, bucket, {', '.join(COLUMNS)} FROM {TABLE} "
        f"WHERE run_id = {p} AND bucket BETWEEN {p} AND {p}", (run_id, lo, hi)).fetchall()
    wanted = set(keys)
    return {(r[0], r[1]): Block(*r[2:]) for r in rows if (r[0], r[1]) in wanted}


def _reread(conn: Any, run_id: int, name: str, block: int) -> Block:
    """A block summarised from the stored points (after the batch's upsert)."""
    p = _ph(conn)
    pts = conn.exec_driver_sql(
        f"SELECT step, value FROM metrics WHERE run_id = {p} AND name = {p} "
        f"AND step BETWEEN {p} AND {p} ORDER BY step",
        (run_id, name, block * BLOCK, block * BLOCK + BLOCK - 1)).fetchall()
    return summarize([(int(s), v) for s, v in pts])


def update(conn: Any, run_id: int, rows: Sequence[tuple[Any, Any, int, str, float | None]]
           ) -> int:
    """Refresh the rollup rows of the blocks ``rows`` touched (call after their upsert, in
    the same transaction). Returns the number of blocks written."""
    if not rows:
        return 0
    batch = _by_block(rows)
    old = _existing(conn, run_id, list(batch))
    out = []
    for (name, block), pts in batch.items():
        prev = old.get((name, block))
        if prev is None:
            new = summarize(pts)  # invariant: no rollup row -> no stored point in the block
        elif pts[0][0] > prev.last_step:
            new = merge(prev, summarize(pts))
        else:
            new = _reread(conn, run_id, name, block)
        out.append((run_id, name, block, *(getattr(new, c) for c in COLUMNS)))
    execute_rows(conn, _UPSERT, out, _TYPES)  # one statement, not one per series
    return len(out)


# each written column's PostgreSQL type (multirow.execute_rows: one array per column)
_TYPES = ("int8", "text", "int8", *("float8" if c.endswith("_value") else "int8"
                                    for c in COLUMNS))
_UPSERT = (f"INSERT INTO {TABLE} (run_id, name, bucket, {', '.join(COLUMNS)}) {{values}} "
           f"ON CONFLICT (run_id, name, bucket) DO UPDATE SET "
           f"{', '.join(f'{c} = excluded.{c}' for c in COLUMNS)}")


def has_rollup(conn: Any) -> bool:
    """Whether this DB has the rollup table (a read-only DB may predate 0003_rollup). Plain
    SELECTs: the SQLite reader's authorizer refuses PRAGMA table_info."""
    if conn.dialect.name == "sqlite":
        sql = f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{TABLE}'"
    else:  # the search_path's schema, as every other statement here
        sql = f"SELECT 1 WHERE to_regclass('{TABLE}') IS NOT NULL"
    return conn.exec_driver_sql(sql).first() is not None
