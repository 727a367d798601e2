"""Imported by every Python started with this folder on PYTHONPATH (stepfault.env_for): arms
the training fault of ``$GATESWEEP_TEST_FAIL_AT`` in that process. Nothing else is loaded."""

import os

if os.environ.get("GATESWEEP_TEST_FAIL_AT"):
    import sys
    from pathlib import Path

    sys.path.append(str(Path(__file__).resolve().parents[3]))  # the repository: tests.support
    from tests.support.stepfault import install_from_env

    install_from_env()
