"""Test-wide environment: keep every tool's files inside a temp area, never the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Set before any test module imports deepspeed / ray / lm_eval.
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TORCH_EXTENSIONS_DIR",
                      str(Path.home() / ".cache" / "gatesweep" / "torch_extensions"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# As the orchestrator's drivers have it (orchestrator/run/env.py): otherwise a test that runs Tune
# in-process leaves Tune's SIGINT handler (it sets an event, never raises) in its worker, and
# a later test's Ctrl-C does nothing (test_hostile_cli's runaway query ran to the timeout).
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")

# Session-wide fixtures: results DB URLs over SQLite and a throwaway PostgreSQL server.
pytest_plugins = ["tests.db_fixtures", "tests.cluster_fixtures", "tests.eval_fixtures"]


# ---- parallel runs (`make test`: pytest -n 2 --dist loadgroup) -----------------------------
# Each test module is one xdist group: its module-scoped fixtures (a trained reference run, a
# submitted sweep, a Ray cluster) are built once, on one worker, and never torn down and rebuilt
# between interleaved tests of other modules. The fault matrix (the longest module, ~60 % of
# the slow suite's serial time) is the exception: its tests are independent, so they are dealt
# into SPLIT_GROUPS groups that run side by side, each on its worker's own two-node cluster.
# Groups run longest first (LONG_FIRST, then collection order; the Makefile passes
# --no-loadscope-reorder, which would otherwise order them by test count), so the short
# modules fill the end and neither worker idles while the other finishes a long one.
SPLIT_MODULES = ("tests/e2e/test_cluster_faults.py",)
SPLIT_GROUPS = 2
LONG_FIRST = ("tests/e2e/test_cluster_faults.py", "tests/e2e/test_slurm.py",
              "tests/e2e/test_dashboard_browser.py", "tests/e2e/test_eval_e2e.py",
              "tests/e2e/test_orchestrator_e2e.py", "tests/e2e/test_cluster.py",
              "tests/e2e/test_cluster_scale.py", "tests/trainer/test_lm_eval.py",
              "tests/e2e/test_multiworker.py", "tests/e2e/test_heartbeat_load.py",
              "tests/e2e/test_db_outage_end.py", "tests/trainer/test_train.py",
              "tests/orchestrator/test_cli.py", "tests/trainer/test_final_eval.py",
              "tests/trainer/test_corpus.py", "tests/results_db/test_results_db_concurrency.py",
              "tests/orchestrator/test_outage_stop_writes.py",
              "tests/orchestrator/test_worker_sys_path.py",
              "tests/orchestrator/test_remote_retry_policy.py")


def _group_of(item: pytest.Item, index: int) -> tuple[int, str]:
    """(rank, xdist group): rank orders the groups, longest first."""
    path = item.nodeid.split("::", 1)[0]
    rank = LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)
    if path in SPLIT_MODULES:
        return rank, f"{path}#{index % SPLIT_GROUPS}"
    return rank, path


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: collection order as written
        return
    seen: dict[str, int] = {}
    keyed = []
    for pos, item in enumerate(items):
        path = item.nodeid.split("::", 1)[0]
        seen[path] = seen.get(path, -1) + 1
        rank, group = _group_of(item, seen[path])
        item.add_marker(pytest.mark.xdist_group(group))
        _suffix_group(item, group, config)
        keyed.append(((rank, group if path in SPLIT_MODULES else "", pos), item))
    items[:] = [item for _, item in sorted(keyed, key=lambda k: k[0])]


def _suffix_group(item: pytest.Item, group: str, config: pytest.Config) -> None:
    """What xdist's loadgroup does (append ``@group`` to the node id, which its scheduler reads),
    for pytest >= 9, where a node id is ``item._id`` and xdist 3.8's ``item._nodeid`` is
    ignored: without this every test is scheduled on its own (plain ``load``)."""
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # pytest < 9: xdist's own suffix works
        return
    if config.getvalue("loadgroup") and isinstance(getattr(item, "_id", None), NodeId):
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


@pytest.fixture(autouse=True)
def _restore_main_module():
    """Streamlit's AppTest runs the app as ``__main__`` and leaves it there. A later test in the
    same worker that starts a ``spawn`` process (test_claims) would then have the child re-run
    dashboard/app.py before its target: the child dies or blocks, and the test waits on it."""
    import sys

    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main
