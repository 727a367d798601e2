"""``submit --detach``: run the sweep as a Ray Job on the cluster, so the laptop can go away.

The job's entrypoint is the same ``orchestrator submit FILE --db URL --storage DIR`` command,
executed by the cluster's job supervisor (inside the job ``RAY_ADDRESS`` points at the
cluster, so the driver joins it instead of starting a local one). The sweep file travels in
the job's ``working_dir``; the DB URL and the storage path must mean the same thing on the
head node as here: an absolute path on a shared file system, or PostgreSQL. ``status`` and the
dashboard read the DB, so they keep working from anywhere; ``ray job logs -f ID`` shows the
driver's output.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

# The client side lives in orchestrator/detach.py (the CLI imports it; this entrypoint imports
# the CLI): re-exported here for callers of the old names.
from orchestrator.detach import (JOB_PYTHON_ENV, DetachedJob, check_db_url, entrypoint,
                                 follow_hint, job_client, require_address, submit_detached,
                                 wait_for_job)

__all__ = ["JOB_PYTHON_ENV", "DetachedJob", "check_db_url", "entrypoint", "follow_hint",
           "job_client", "job_main", "require_address", "submit_detached", "wait_for_job"]


def job_main(argv: list[str]) -> int:
    """The job's entrypoint: ``python -m orchestrator.jobs FILE --db ... --storage ...``.

    Ray deletes the job's working_dir (our cwd) when the driver's Ray connection closes, and
    a vanished cwd breaks every later relative-path lookup (``os.getcwd`` raises). So copy the
    sweep file out and run ``orchestrator submit`` from a directory that stays.
    """
    from orchestrator.cli import main

    if not argv:
        print("usage: python -m orchestrator.jobs FILE [submit options]", file=sys.stderr)
        return 2
    src = Path(argv[0]).resolve()
    with tempfile.TemporaryDirectory(prefix="gatesweep-job-") as tmp:
        stable = Path(tmp)
        shutil.copy(src, stable / src.name)
        os.chdir(stable)
        try:
            return main(["submit", str(stable / src.name), *argv[1:]])
        finally:
            os.chdir(tempfile.gettempdir())  # leave before the directory is removed


if __name__ == "__main__":
    sys.exit(job_main(sys.argv[1:]))
