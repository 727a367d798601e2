"""Process environment for Ray and the DeepSpeed trials (pitfalls: docs/STACK-NOTES).

- DS_ACCELERATOR=cpu on machines without CUDA (else DeepSpeed warns and guesses).
- TORCH_EXTENSIONS_DIR stable (~/.cache/gatesweep/torch_extensions): DeepSpeed's shm comm op
  compiles for 60-80 s on first use and is cached there.
- No launcher variables (MASTER_PORT, RANK, ...) may leak into a trial: without them
  trainer.dist starts a one-rank group that opens no port; with a stale one it would start from
  that port, and concurrent trials would collide on it.
- RAY_AUTH_MODE=disabled by default for local clusters (Ray 2.60 enables token auth).
- The job's runtime_env carries a working_dir of its own, an empty one (``trial_runtime_env``):
  without one, Ray puts the driver's current directory first on every worker's sys.path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

LAUNCHER_VARS = ("MASTER_PORT", "MASTER_ADDR", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                 "LOCAL_WORLD_SIZE", "GROUP_RANK")
# Copied from the driver into the workers' runtime_env when set.
PASS_THROUGH = ("DS_ACCELERATOR", "TORCH_EXTENSIONS_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                "HF_HOME", "TOKENIZERS_PARALLELISM", "GATESWEEP_HEARTBEAT_S",
                "PYTHONPATH")


def default_extensions_dir() -> str:
    return str(Path.home() / ".cache" / "gatesweep" / "torch_extensions")


def driver_defaults() -> None:
    """Defaults for the `orchestrator` process (it starts the local Ray cluster)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", default_extensions_dir())
    # We handle SIGINT/SIGTERM ourselves (mark the runs cancelled, then stop Ray).
    os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    # Tune's JSON and CSV loggers only when asked for (scheduler.tune_file_loggers); this
    # keeps Tune from adding its TensorBoard logger, whose import pulls torch into the driver.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")


def worker_env_vars() -> dict[str, str]:
    """env_vars for the Ray runtime_env of the trials."""
    env = {k: os.environ[k] for k in PASS_THROUGH if k in os.environ}
    env.setdefault("TORCH_EXTENSIONS_DIR", default_extensions_dir())
    return env


def trial_runtime_env(env_vars: dict[str, str], empty_dir: str) -> dict[str, Any]:
    """The runtime_env of the sweep's Ray job: the trials' ``env_vars`` and, as its
    working_dir, ``empty_dir`` (an empty directory that must exist until ``ray.init`` returns).

    Why the working_dir: a driver that has none sends its current directory and its script's
    directory to the workers (JobConfig._py_driver_sys_path, set in ray/_private/worker.py
    ``connect``), and each worker inserts them first on its sys.path -- a ``polars.py`` or
    ``trainer/`` where the user typed ``orchestrator submit`` was imported by every trial, on
    a local Ray and on a cluster joined by address alike (Ray Client skips only the current
    directory). A job with a working_dir gets neither; Ray uploads the empty directory once
    and unpacks it on each node into its own session folder, which
    becomes the workers' sys.path entry and starting directory (Tune then moves a trial into
    its trial folder, as before). A worker_process_setup_hook cannot help: it runs after the
    paths are inserted and after the trainable's imports."""
    return {"env_vars": env_vars, "working_dir": empty_dir}


def prepare_trial_env() -> None:
    """Inside a trial, before deepspeed is imported.

    A reused trial actor (TuneConfig(reuse_actors=True)) keeps the process group it made for
    its first trial, and DeepSpeed checks the launcher variables again on every initialize:
    only a process without a group drops them.
    """
    if not _dist_initialized():
        for k in LAUNCHER_VARS:
            os.environ.pop(k, None)
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", default_extensions_dir())
    if "DS_ACCELERATOR" not in os.environ:
        import torch

        os.environ["DS_ACCELERATOR"] = "cuda" if torch.cuda.is_available() else "cpu"


def _dist_initialized() -> bool:
    dist = sys.modules.get("torch.distributed")
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def absolute_db_url(url: str) -> str:
    """sqlite:///results.db -> sqlite:////abs/cwd/results.db (results_db.absolute_url: trials
    run elsewhere and Tune may change their working directory)."""
    import results_db

    return results_db.absolute_url(url)
