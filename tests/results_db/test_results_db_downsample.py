"""db.metrics(max_points=...) against a plain-Python reference of the bucket rule, on SQLite
and PostgreSQL: irregular steps, NULL (NaN) runs covering whole buckets, a spike, series at and
just over the limit, with and without a names filter. The long series here have buckets wider
than a rollup block, so they take the rollup read (results_db/write/rollup.py);
tests/results_db/test_results_db_rollup.py covers the raw-point read too."""

from __future__ import annotations

import math
import random
from collections import defaultdict

import pytest

import results_db
from results_db.write.rollup import BLOCK
from tests.support.synth import add_finished_run

MAXP = 40  # 10 buckets of at most 4 points


@pytest.fixture
def db(db_url: str):
    with results_db.open(db_url) as d:
        yield d


def buckets(pts: list[tuple[int, float | None]], maxp: int) -> dict[int, int]:
    """{step: its bucket}. Buckets are N/4 equal step ranges; when they span >= one rollup
    block (results_db/write/rollup.py: 256 steps), whole blocks are bucketed, each by its first
    stored step (the rollup read), else each point by its own step (the raw-point read)."""
    nb = maxp // 4
    s0, width = pts[0][0], pts[-1][0] - pts[0][0] + 1
    if width < BLOCK * nb:
        return {s: (s - s0) * nb // width for s, _ in pts}
    first: dict[int, int] = {}
    for s, _ in pts:
        first.setdefault(s // BLOCK, s)
    return {s: (first[s // BLOCK] - s0) * nb // width for s, _ in pts}


def reference(points: list[tuple[int, float | None]], maxp: int) -> list[tuple[int, float | None]]:
    """The documented rule: whole when short, else per step bucket its min, max, last number
    and first NULL (ties: the earliest step)."""
    pts = sorted(points)
    if len(pts) <= maxp:
        return pts
    of = buckets(pts, maxp)
    grouped: dict[int, list[tuple[int, float | None]]] = defaultdict(list)
    for step, value in pts:
        grouped[of[step]].append((step, value))
    keep: set[tuple[int, float | None]] = set()
    for rows in grouped.values():
        nums = [r for r in rows if r[1] is not None]
        if nums:
            keep |= {min(nums, key=lambda r: (r[1], r[0])),
                     max(nums, key=lambda r: (r[1], -r[0]))}
        if rows[-1][1] is not None:  # a NULL last point: the first NULL stands for it
            keep.add(rows[-1])
        nulls = [r for r in rows if r[1] is None]
        if nulls:
            keep.add(nulls[0])
    return sorted(keep, key=lambda r: r[0])


def _series(rng: random.Random, n: int, gap: int = 3) -> list[tuple[int, float | None]]:
    step, out = 7, []
    for _ in range(n):
        step += rng.randint(1, gap)  # irregular steps: buckets hold different counts
        out.append((step, rng.random()))
    return out


@pytest.fixture
def filled(db) -> tuple[list[int], dict[tuple[int, str], list[tuple[int, float | None]]]]:
    rng = random.Random(3)
    loss = _series(rng, 2000)
    loss[500] = (loss[500][0], 99.0)  # a spike
    for i in range(1200, 1500):  # NaN over several whole buckets (a divergence)
        loss[i] = (loss[i][0], None)
    loss[1900] = (loss[1900][0], None)  # a lone NaN inside a bucket with numbers
    series = {"train/loss": loss, "train/lr": _series(rng, 10),
              "at/limit": _series(rng, MAXP), "over/limit": _series(rng, MAXP + 1)}
    sid = db.ensure_sweep("ds")
    ids, expected = [], {}
    for r in range(2):
        pts = [(s, name, math.nan if v is None else v + r)
               for name, ser in series.items() for s, v in ser]
        rid = add_finished_run(db, sid, "baseline", seed=r, points=pts)
        ids.append(rid)
        for name, ser in series.items():
            expected[(rid, name)] = [(s, None if v is None else v + r) for s, v in ser]
    return ids, expected


def _by_series(frame) -> dict[tuple[int, str], list[tuple[int, float | None]]]:
    out: dict[tuple[int, str], list[tuple[int, float | None]]] = defaultdict(list)
    for r in frame.iter_rows(named=True):
        out[(r["run_id"], r["name"])].append((r["step"], r["value"]))
    return dict(out)


def test_downsampling_matches_the_reference(db, filled) -> None:
    ids, expected = filled
    got = _by_series(db.metrics(ids, None, max_points=MAXP))  # all names: the skip-scan path
    assert set(got) == set(expected)
    for key, pts in expected.items():
        want = reference(pts, MAXP)
        assert got[key] == want, key  # floats round-trip exactly
        assert len(got[key]) <= MAXP
    loss = got[(ids[0], "train/loss")]
    assert (max(v for _, v in loss if v is not None)) == 99.0  # the spike survives
    assert len(got[(ids[0], "at/limit")]) == MAXP  # whole at the limit
    assert len(got[(ids[0], "over/limit")]) < MAXP + 1  # cut just over it


def test_nan_buckets_keep_one_null_point(db, filled) -> None:
    ids, expected = filled
    m = db.metrics([ids[1]], ["train/loss"], max_points=MAXP)
    nulls = [s for s, v in zip(m["step"], m["value"], strict=True) if v is None]
    pts = expected[(ids[1], "train/loss")]
    of = buckets(pts, MAXP)
    null_buckets = {of[s] for s, v in pts if v is None}
    assert len(nulls) == len(null_buckets)  # exactly one NULL point per bucket holding NaN
    assert pts[1200][0] in nulls and pts[1900][0] in nulls  # first NaN of each bucket


def test_names_filter_and_empty_selections(db, filled) -> None:
    ids, expected = filled
    m = db.metrics(ids + ids[:1], ["train/lr", "nope", "train/lr"], max_points=MAXP)
    assert m["name"].unique().to_list() == ["train/lr"] and m.height == 20
    assert m["step"].to_list() == [s for _ in ids for s, _ in expected[(ids[0], "train/lr")]]
    assert db.metrics([], ["train/loss"], max_points=MAXP).height == 0
    assert db.metrics(ids, [], max_points=MAXP).height == 0
    assert db.metrics(None, ["train/lr"], max_points=MAXP).height == 20  # every run
