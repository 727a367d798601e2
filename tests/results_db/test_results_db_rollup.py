"""The metric rollup (results_db/write/rollup.py, migration 0003_rollup) on SQLite and PostgreSQL:
kept at ingest through appends, rewrites, out-of-order batches and NaN; equal to the backfill
of the same points; and read by db-side downsampling with the documented block-bucket rule."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from sqlalchemy import text

import results_db
from results_db.read.downsample import metrics_sql, read_metrics
from results_db.schema.migrate import upgrade_engine
from results_db.sqlread import frame
from results_db.write import rollup
from tests.results_db.test_results_db_downsample import reference
from tests.support.migrations import downgrade_engine
from tests.support.synth import add_finished_run

B = rollup.BLOCK


@pytest.fixture
def db(db_url: str):
    with results_db.open(db_url) as d:
        yield d


def stored_rollup(db) -> dict[tuple[int, str, int], tuple]:
    cols = ", ".join(rollup.COLUMNS)
    with db.engine.connect() as conn:
        rows = conn.execute(text(f"SELECT run_id, name, bucket, {cols} FROM metric_rollup"))
        return {(r[0], r[1], r[2]): tuple(r[3:]) for r in rows}


def expected_rollup(db, run_ids: list[int]) -> dict[tuple[int, str, int], tuple]:
    """summarize() of the stored raw points, block by block."""
    raw = db.metrics(run_ids=run_ids)
    blocks: dict[tuple[int, str, int], list] = defaultdict(list)
    for r in raw.iter_rows(named=True):
        blocks[(r["run_id"], r["name"], r["step"] // B)].append((r["step"], r["value"]))
    return {k: tuple(getattr(rollup.summarize(v), c) for c in rollup.COLUMNS)
            for k, v in blocks.items()}


def _messy_run(db) -> int:
    """One run logged the way retried attempts log: forward batches, a rewrite of earlier
    steps (lower values, a new min), an out-of-order back-fill, NaN points, duplicates."""
    sid = db.ensure_sweep("rollup")
    rid = add_finished_run(db, sid, "baseline", points=[])
    rng = random.Random(5)
    pts = [(s, "train/loss", 10.0 - s / 500 + rng.random()) for s in range(0, 3000, 2)]
    for i in range(0, len(pts), 97):  # forward, 97 points per call (blocks split across calls)
        db.log_metrics(rid, None, pts[i:i + 97])
    db.log_metrics(rid, None, [(s, "train/loss", -1.0 - s) for s in range(600, 700, 2)])
    db.log_metrics(rid, None, [(s, "train/loss", 50.0) for s in range(1, 800, 2)])  # odd steps
    db.log_metrics(rid, None, [(s, "train/loss", float("nan")) for s in range(2100, 2200)])
    db.log_metrics(rid, None, [(5, "train/lr", 1.0), (5, "train/lr", 2.0), (3, "train/lr", 0.5)])
    return rid


def test_ingest_keeps_the_rollup_equal_to_the_points(db) -> None:
    rid = _messy_run(db)
    got, want = stored_rollup(db), expected_rollup(db, [rid])
    assert got.keys() == want.keys()
    for key in want:
        assert got[key] == pytest.approx(want[key], nan_ok=True), key
    # spot checks against the logged values: the rewrite made steps 600..698 the minimum
    blk = got[(rid, "train/loss", 2)]  # steps 512..767
    assert (blk[2], blk[3]) == (698, pytest.approx(-699.0))  # min_step, min_value
    assert (blk[4], blk[5]) == (513, 50.0)  # max: the earliest of the tied 50.0 points
    assert got[(rid, "train/lr", 0)][0] == 2  # n: steps 3 and 5 (5 logged twice)
    nan_blk = got[(rid, "train/loss", 2100 // B)]
    assert nan_blk[-1] == 2100  # first NULL step


def test_backfill_equals_ingest(db) -> None:
    """Migration 0003 on a DB whose points predate it builds the same rows as ingest does."""
    _messy_run(db)
    before = stored_rollup(db)
    downgrade_engine(db.engine, "0002_claims")
    upgrade_engine(db.engine)  # recreates metric_rollup and backfills it from metrics
    after = stored_rollup(db)
    assert after.keys() == before.keys() and len(after) > 10
    for key in before:
        assert after[key] == pytest.approx(before[key], nan_ok=True), key


def test_downsampled_read_uses_the_rollup_rule(db) -> None:
    sid = db.ensure_sweep("long")
    rng = random.Random(9)
    series = [(s, rng.random()) for s in range(0, 40_000, 3)]  # 13,334 points
    series[5000] = (series[5000][0], 99.0)  # a spike
    series[9000:9300] = [(s, None) for s, _ in series[9000:9300]]  # a divergence
    rid = add_finished_run(db, sid, "baseline", points=[
        (s, "train/loss", float("nan") if v is None else v) for s, v in series])
    short = add_finished_run(db, sid, "baseline", seed=1,
                             points=[(s, "train/loss", 1.0) for s in range(50)])
    maxp = 100  # 25 buckets of 1,600 steps: read from the rollup
    got = read_metrics(db.reader, [rid, short], ["train/loss"], maxp)
    long_pts = [(r["step"], r["value"]) for r in got.iter_rows(named=True)
                if r["run_id"] == rid]
    assert long_pts == [(s, pytest.approx(v) if v is not None else None)
                        for s, v in reference(series, maxp)]
    assert len(long_pts) <= maxp
    assert (series[5000][0], 99.0) in long_pts and (series[9000][0], None) in long_pts
    assert got.filter(got["run_id"] == short).height == 50  # short series: whole
    # buckets narrower than a block (200 steps): the raw-point read, per point
    exact = read_metrics(db.reader, [rid], ["train/loss"], 800)
    assert [(r["step"], r["value"]) for r in exact.iter_rows(named=True)] == \
        reference(series, 800)
    sql, params = metrics_sql([rid], ["train/loss"], 800, db.reader.dialect.name)
    assert exact.equals(frame(db.reader, sql, params))  # the same SQL as before the rollup


def test_a_db_without_the_rollup_reads_raw_points(db) -> None:
    sid = db.ensure_sweep("old")
    rid = add_finished_run(db, sid, "baseline",
                           points=[(s, "train/loss", float(s % 7)) for s in range(5000)])
    want = read_metrics(db.reader, [rid], ["train/loss"], 8)
    downgrade_engine(db.engine, "0002_claims")  # as a read-only DB of an older schema is
    got = read_metrics(db.reader, [rid], ["train/loss"], 8)
    for read in (want, got):  # 2 buckets: min 0, max 6, and the series' last point
        assert read.height <= 8 and {0.0, 6.0} <= set(read["value"].to_list())
        assert read.row(-1)[2:] == (4999, 4999 % 7)
    sql, params = metrics_sql([rid], ["train/loss"], 8, db.reader.dialect.name)
    assert got.equals(frame(db.reader, sql, params))
