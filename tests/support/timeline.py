"""Where a test run's time went: a pytest plugin that records each test's wall interval per
xdist worker, and a report of it (docs/testing.md, "How the figures are taken").

    pytest -p tests.support.timeline -m "slow or not slow"      # writes $TIMELINE_DIR/*.jsonl
    python -m tests.support.timeline [DIR]                      # modules by cost, worker ends

The interval runs from a test's setup to its teardown, fixtures included, so a module's sum is
what it holds its worker for; a worker's last interval ending well before the other's is time
the run waited on one worker alone.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

DIR = Path(os.environ.get("TIMELINE_DIR", "/tmp/gatesweep-timeline"))
_out: IO[str] | None = None


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _out
    start = time.time()
    yield
    if _out is None:
        DIR.mkdir(parents=True, exist_ok=True)
        _out = open(DIR / f"{_worker()}.jsonl", "a", buffering=1)  # noqa: SIM115 - per process
    _out.write(json.dumps({"id": item.nodeid.split("@")[0], "t0": start, "t1": time.time(),
                           "w": _worker()}) + "\n")


def report(rows: list[dict[str, Any]], top: int = 30) -> str:
    """Modules by worker-seconds, then each worker's end and its last modules."""
    t0, t1 = min(r["t0"] for r in rows), max(r["t1"] for r in rows)
    cost: dict[str, float] = collections.defaultdict(float)
    count: collections.Counter[str] = collections.Counter()
    for r in rows:
        module = r["id"].split("::")[0]
        cost[module] += r["t1"] - r["t0"]
        count[module] += 1
    lines = [f"{len(rows)} tests, first start to last end {t1 - t0:.0f} s, "
             f"{sum(cost.values()):.0f} worker-s"]
    lines += [f"{s:7.1f} s {count[m]:4d}  {m}" for m, s in
              sorted(cost.items(), key=lambda kv: -kv[1])[:top]]
    for w in sorted({r["w"] for r in rows}):
        mine = sorted((r for r in rows if r["w"] == w), key=lambda r: r["t0"])
        last = list(dict.fromkeys(r["id"].split("::")[0] for r in mine[-40:]))[-3:]
        lines.append(f"{w}: ends at {mine[-1]['t1'] - t0:.0f} s, busy "
                     f"{sum(r['t1'] - r['t0'] for r in mine):.0f} s, last: {', '.join(last)}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    where = Path(argv[0]) if argv else DIR
    rows = [json.loads(line) for f in sorted(where.glob("*.jsonl"))
            for line in f.read_text().splitlines() if line]
    if not rows:
        print(f"no timeline under {where}", file=sys.stderr)
        return 2
    print(report(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
