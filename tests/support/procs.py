"""Worker processes for the concurrency tests, started from a clean process.

``fork`` from a pytest worker copies a process that has run other tests: it has threads
(execnet's, tqdm's monitor, ...) and may hold thread pools (polars', torch's) none of which
come along. A child that then waits on a lock one of those threads held, or hands work to such
a pool, hangs for good. CI saw a fork pool of four SQLite writers hang until the 900 s test
timeout (the children's stacks were not captured); the polars case hangs every time here
(parent uses the pool, forked child uses it). Python 3.12 warns about fork in a threaded
process, and 3.14 makes ``forkserver`` the default on Linux: each child forks from a server
process that ran nothing but ``preload`` (imported once, so a child still starts at fork cost).
"""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.context import ForkServerContext

# A pool's results must arrive within this; a hung child then fails its test in minutes.
RESULT_TIMEOUT_S = 300


# One forkserver serves every context of a process, and its preload is the one set before it
# started: whichever test starts it, it imports what any caller's children run (the results DB
# writers, tests/support/cliproc.py's CLI), so no caller needs to know who came first.
SERVER_PRELOAD = ("results_db", "orchestrator.cli.main")


def clean_context(*preload: str) -> ForkServerContext:
    """A multiprocessing context whose children fork from a fresh server that has imported
    SERVER_PRELOAD and the modules ``preload`` (the caller's own, for its children's targets);
    a caller's modules reach the server only if it is the first to start it."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([*SERVER_PRELOAD, *preload])
    return ctx
