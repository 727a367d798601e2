"""THE way the project starts a child Python: its command line and its environment.

``python -m pkg`` puts the working directory first on ``sys.path``, so a ``dashboard/``,
``orchestrator/`` or ``streamlit/`` package, or a ``polars.py``, in the directory where the user
typed the command would run in place of ours. ``-P`` (Python 3.11) leaves the working directory
out; ``PYTHONSAFEPATH=1`` in the child's environment does the same for every Python the child
starts in turn (a rerun the dashboard's button starts from inside Streamlit). What a child needs
is passed to it explicitly (arguments, environment), never found through the working directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

SAFE_PATH_ENV = "PYTHONSAFEPATH"


def python_command(module: str, *args: str, python: str | None = None) -> list[str]:
    """``[python, -P, -m, module, *args]``; ``python`` defaults to this interpreter (another one
    for a Ray Job's entrypoint on the cluster)."""
    return [python or sys.executable, "-P", "-m", module, *args]


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a child, with the safe path on and ``extra`` added."""
    return {**os.environ, SAFE_PATH_ENV: "1", **(extra or {})}
