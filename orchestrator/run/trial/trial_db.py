"""One results-DB handle per trial process and URL, kept across the trials it runs.

Tune reuses trial actors (``reuse_actors``), so one process runs many short trials. A handle
opened per trial paid, every time, for a new SQLAlchemy engine, new server connections and --
the larger part -- compiling every statement again, since SQLAlchemy caches compiled SQL per
engine: 406 compilations in 29 trials of 2 steps, about a third of their DB time (cProfile,
docs/benchmarks.md "Per-run overhead"). The handle is bounded (one engine per URL per
process, its pool as small as before) and checks each connection before use (the engine's
pre-ping), so one left from before a DB restart is replaced, not used.
"""

from __future__ import annotations

import os

import results_db
from results_db import ResultsDB

_HANDLES: dict[tuple[int, str], ResultsDB] = {}


def trial_db(url: str) -> ResultsDB:
    """This process's handle on ``url`` (opened on first use, never migrated: the driver did).
    Keyed by pid too: a forked child must open its own (engines do not cross processes)."""
    key = (os.getpid(), url)
    db = _HANDLES.get(key)
    if db is None:
        db = _HANDLES[key] = results_db.open(url, migrate=False)
    return db
