"""tests/support/timeline.py: the suite's time per module and per worker, from the intervals."""

from __future__ import annotations

from tests.support.timeline import report


def test_report_sums_modules_and_names_each_workers_end() -> None:
    rows = [{"id": "tests/a.py::t1", "t0": 100.0, "t1": 110.0, "w": "gw0"},
            {"id": "tests/a.py::t2", "t0": 110.0, "t1": 115.0, "w": "gw0"},
            {"id": "tests/b.py::t1", "t0": 100.0, "t1": 130.0, "w": "gw1"}]
    lines = report(rows).splitlines()
    assert lines[0] == "3 tests, first start to last end 30 s, 45 worker-s"
    assert lines[1].split() == ["30.0", "s", "1", "tests/b.py"]  # the costliest first
    assert lines[2].split() == ["15.0", "s", "2", "tests/a.py"]
    assert lines[3] == "gw0: ends at 15 s, busy 15 s, last: tests/a.py"
    assert lines[4] == "gw1: ends at 30 s, busy 30 s, last: tests/b.py"
