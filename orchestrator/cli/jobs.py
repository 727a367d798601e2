"""``submit --detach``, the cluster side: the Ray Job's entrypoint, ``job_main``.

The client that submits the job is orchestrator/cli/detach.py (kept apart: the entrypoint runs the
CLI, and the CLI calls the client, so one module holding both was an import cycle).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path


def job_main(argv: list[str]) -> int:
    """The job's entrypoint: ``python -m orchestrator.cli.jobs FILE --db ... --storage ...``.

    Ray deletes the job's working_dir (our cwd) when the driver's Ray connection closes, and
    a vanished cwd breaks every later relative-path lookup (``os.getcwd`` raises). So copy the
    sweep file out and run ``orchestrator submit`` from a directory that stays.
    """
    from orchestrator.cli.main import main

    if not argv:
        print("usage: python -m orchestrator.cli.jobs FILE [submit options]", file=sys.stderr)
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
