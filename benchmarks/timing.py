"""One timing rule for the benchmark scripts: the first (cold) call apart, then the median."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def timed(fn: Callable[[], Any], repeat: int = 5) -> tuple[float, float, Any]:
    """(first call s, median of the next ``repeat`` calls s, the first call's result)."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times), out
