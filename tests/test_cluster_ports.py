"""The test clusters' worker port blocks (tests/cluster_fixtures.py): disjoint between the live
nodes of every process (the other xdist worker's included) and below the kernel's ephemeral
range, where free_port() answers and outgoing connections take their local port."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path

from tests import cluster_fixtures as cf

HOLD = """\
import contextlib, sys
from tests import cluster_fixtures as cf
with contextlib.ExitStack() as stack:
    print(*cf._claim_worker_ports(stack), flush=True)
    sys.stdin.read()  # hold the block until the parent closes our stdin
"""


def _disjoint(ranges: list[tuple[int, int]]) -> bool:
    ordered = sorted(ranges)
    return all(hi < lo2 for (_, hi), (lo2, _) in zip(ordered, ordered[1:]))


def test_live_nodes_never_share_worker_ports_and_stay_below_ephemeral_ports() -> None:
    other = subprocess.Popen([sys.executable, "-c", HOLD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1])
    try:
        assert other.stdout is not None
        held = tuple(map(int, other.stdout.readline().split()))  # another process's node
        assert len(held) == 2, held
        with contextlib.ExitStack() as stack:
            mine = [cf._claim_worker_ports(stack) for _ in range(3)]
            assert _disjoint([held, *mine]), (held, mine)
            for lo, hi in [held, *mine]:
                assert cf.WORKER_PORT_BASE <= lo and hi == lo + cf.WORKER_PORT_BLOCK - 1
                assert hi < cf._ephemeral_low()
        with contextlib.ExitStack() as stack:  # ours were released; the other's is still held
            again = [cf._claim_worker_ports(stack) for _ in range(3)]
            assert _disjoint([held, *again]) and held not in again
    finally:
        other.communicate("", timeout=30)
