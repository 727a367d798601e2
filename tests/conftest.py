"""Test-wide environment: keep every tool's files inside a temp area, never the network."""

from __future__ import annotations

import os
from pathlib import Path

# Set before any test module imports deepspeed / ray / lm_eval.
os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TORCH_EXTENSIONS_DIR",
                      str(Path.home() / ".cache" / "gatesweep" / "torch_extensions"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

# Session-wide fixtures: results DB URLs over SQLite and a throwaway PostgreSQL server.
pytest_plugins = ["tests.db_fixtures", "tests.cluster_fixtures", "tests.eval_fixtures"]
