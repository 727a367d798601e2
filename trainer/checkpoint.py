"""Atomic, rotating DeepSpeed checkpoints of a run in its ``checkpoint_dir``.

Layout: ``checkpoint_dir/step_00000100/`` (one DeepSpeed tag: model, optimizer, ``client_state``
with the trainer's own state) plus ``gatesweep_meta.json`` written last. A checkpoint is first
written under ``.staging-step_XXXXXXXX/`` and then *renamed* into place (atomic on one file
system), so a crash mid-save leaves only a staging directory, which is never loaded and is
removed by the next save. The newest ``keep`` (2) complete checkpoints are kept.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch.distributed as tdist

TAG_RE = re.compile(r"^step_(\d{8})$")
META = "gatesweep_meta.json"
STAGING = ".staging-"


def tag_for(step: int) -> str:
    return f"step_{step:08d}"


def complete_checkpoints(checkpoint_dir: str | Path) -> list[tuple[int, Path]]:
    """(step, path) of every complete checkpoint, oldest first."""
    root = Path(checkpoint_dir)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        m = TAG_RE.match(p.name)
        if m and p.is_dir() and (p / META).is_file():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(checkpoint_dir: str | Path) -> tuple[int, Path] | None:
    found = complete_checkpoints(checkpoint_dir)
    return found[-1] if found else None


def _rank() -> int:
    return tdist.get_rank() if tdist.is_available() and tdist.is_initialized() else 0


def _barrier() -> None:
    if tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1:
        tdist.barrier()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _publish(root: Path, staging: Path, tag: str, meta: dict[str, Any]) -> Path:
    """Rank 0: write the marker, then rename the finished tag directory into place."""
    written = staging / tag
    with (written / META).open("w") as fh:
        json.dump(meta, fh)
        fh.flush()
        os.fsync(fh.fileno())
    final = root / tag
    if final.exists():  # the same step saved again (e.g. a resumed run's final save)
        shutil.rmtree(final)
    os.rename(written, final)
    _fsync_dir(root)
    shutil.rmtree(staging, ignore_errors=True)
    return final


def prune(checkpoint_dir: str | Path, keep: int = 2) -> None:
    """Delete all but the newest ``keep`` complete checkpoints and any stale staging dirs."""
    root = Path(checkpoint_dir)
    for _, path in complete_checkpoints(root)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
    for p in root.glob(STAGING + "*"):
        shutil.rmtree(p, ignore_errors=True)


def save(engine: Any, checkpoint_dir: str | Path, step: int, client_state: dict[str, Any],
         keep: int = 2) -> Path:
    """Save the engine + ``client_state`` as the checkpoint of ``step`` (collective call)."""
    root = Path(checkpoint_dir)
    tag = tag_for(step)
    staging = root / f"{STAGING}{tag}"
    if _rank() == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
    _barrier()
    engine.save_checkpoint(str(staging), tag=tag, client_state=client_state, save_latest=False)
    _barrier()
    final = root / tag
    if _rank() == 0:
        final = _publish(root, staging, tag, {"step": step})
        prune(root, keep)
    _barrier()
    return final


def load(engine: Any, checkpoint_dir: str | Path) -> tuple[int, dict[str, Any]] | None:
    """Load the newest complete checkpoint into ``engine``; (step, client_state) or None."""
    found = latest_checkpoint(checkpoint_dir)
    if found is None:
        return None
    step, path = found
    load_path, client_state = engine.load_checkpoint(str(path.parent), tag=path.name)
    if load_path is None:
        raise RuntimeError(f"checkpoint_dir: DeepSpeed could not load the checkpoint {path}")
    return step, client_state or {}
