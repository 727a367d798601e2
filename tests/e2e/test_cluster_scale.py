"""Scale-out at a small size: 4 Ray nodes started with ``ray start`` (1 CPU + 1 fake GPU each),
one PostgreSQL, 20 real runs (5 per node, one after another) through the real ``orchestrator
submit --address --db``, sampled by benchmarks/cluster_scale.py's monitor. Checks what must
hold at any scale: every run succeeded, no trial process ever held more than 4 server
connections (2 per engine, writer + reader), the driver stayed within its bound, and every
metric point is there exactly once.
The 200/1,000-run figures are the benchmark's (docs/benchmarks.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from contract.reporter import MemoryReporter
from orchestrator.run.env import prepare_trial_env
from orchestrator.sweep.plan import make_plan
from results_db.engine import PG_POOL_SIZE

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import cluster_scale  # noqa: E402

pytestmark = pytest.mark.slow
# 5 runs per node: each node's trials follow one another, the case the bounds below are about
NODES, RUNS, STEPS = 4, 20, 2
PER_PROCESS = 2 * PG_POOL_SIZE  # a writer and a reader engine
DRIVER_HANDLES = 3  # submit's, the scheduler's and its DB-sync callback's ResultsDB


def _expected_points(sweep_file: Path) -> dict[str, int]:
    """(metric, step) points per run, from the trainer with an in-memory reporter (one run
    per variant: the seed does not change which points a run logs)."""
    from trainer.train import train

    prepare_trial_env()
    per_variant: dict[str, int] = {}
    out = {}
    for r in make_plan(sweep_file).runs:
        if r.variant not in per_variant:
            rep = MemoryReporter()
            train(r.spec, rep, sweep_file.parent / "expect" / r.name)
            per_variant[r.variant] = len({(s, k) for s, k, _ in rep.points})
        out[r.name] = per_variant[r.variant]
    return out


def test_twenty_runs_on_four_nodes_bounded_connections_no_row_lost(
        pg_url: str, tmp_path: Path) -> None:
    sweep = "scale-e2e"
    sweep_file = tmp_path / f"{sweep}.yaml"
    sweep_file.write_text(cluster_scale.sweep_text(sweep, RUNS, STEPS))
    expected = _expected_points(sweep_file)
    cluster = cluster_scale.start_cluster(NODES, 1)
    try:
        sub, s = cluster_scale.run_submit(cluster, sweep_file, sweep, tmp_path / "storage",
                                          pg_url, probe_every=1e9)
    finally:
        cluster_scale.stop_cluster(cluster)
    assert sub["rc"] == 0, sub["tail"]
    integ = cluster_scale.integrity(pg_url, sweep, expected)
    assert (integ["runs"], integ["succeeded"]) == (RUNS, RUNS)
    assert (integ["lost"], integ["duplicated"]) == (0, 0), integ
    assert integ["metric_rows"] == integ["expected_rows"] == sum(expected.values())
    assert s.conns_total, "the monitor never sampled the server"
    assert 1 <= s.per_trial_max <= PER_PROCESS, s
    assert s.trial_procs_max <= NODES  # one trial per node at a time: {CPU: 1, GPU: 1}
    assert max(s.conns_driver) <= DRIVER_HANDLES * PER_PROCESS
    assert max(s.conns_trials) <= NODES * PER_PROCESS
