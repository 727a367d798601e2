"""Under an address-space limit (``ulimit -v``) too small for polars, scipy or the chart
renderer, a command says so in one line, with the limit and what it needs, instead of an
ImportError naming a ``.so``, a Rust allocator abort or a NameError inside polars
(orchestrator/cli/memlimit.py). Real processes under a real RLIMIT_AS."""

from __future__ import annotations

import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import results_db
from contract.child import child_env
from orchestrator.cli import memlimit
from tests.support import findings_db


def _limited(mib: int) -> Callable[[], None]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib * 2**20, resource.RLIM_INFINITY))
    return cap


def _cli(args: list[str], mib: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=180, preexec_fn=_limited(mib),
                          env=child_env({}))


@pytest.fixture(scope="module")
def db_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('mem') / 'r.db'}"
    db = results_db.open(url)
    findings_db.build(db)
    db.close()
    return url


def test_a_limit_below_the_floor_is_one_line_and_help_still_answers(
        db_url: str, tmp_path: Path) -> None:
    res = _cli(["leaderboard", findings_db.SWEEP, "--db", db_url], 800, tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    lines = res.stderr.strip().splitlines()
    assert lines == [f"error: the address-space limit (ulimit -v) is 800 MiB; gatesweep needs "
                     f"at least {memlimit.FLOOR_MIB} MiB (polars, scipy and their thread pools "
                     f"map more than they use): raise it (ulimit -v "
                     f"{memlimit.FLOOR_MIB * 1024}) or unset it"], res.stderr[-2000:]
    assert _cli(["--help"], 800, tmp_path).returncode == 0  # nothing heavy to load


@pytest.mark.slow  # a report builder child under the limit (~4 s)
def test_a_report_builder_out_of_memory_names_the_limit(db_url: str, tmp_path: Path) -> None:
    """1.6 GiB: above the CLI's floor, below what the report's builder maps (vl_convert)."""
    out = tmp_path / "r.html"
    res = _cli(["report", findings_db.SWEEP, "--db", db_url, "--out", str(out)], 1600, tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        "error: report: the report builder ran out of memory loading its libraries "
        f"(ulimit -v is 1600 MiB; it needs about {memlimit.REPORT_MIB} MiB)"], res.stderr[-2000:]
    assert not out.exists()


def test_the_signs_are_read_from_what_each_layer_prints() -> None:
    for text in ("ImportError: x.so: failed to map segment from shared object",
                 "memory allocation of 8388608 bytes failed", "MemoryError",
                 "<jemalloc>: background thread creation failed (11)"):
        assert memlimit.said(text, "it", 10) is not None, text
    assert memlimit.said("ValueError: bad value", "it", 10) is None
