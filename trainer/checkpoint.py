"""Atomic, rotating DeepSpeed checkpoints of a run in its ``checkpoint_dir``.

Layout: ``checkpoint_dir/step_00000100/`` (one DeepSpeed tag: model, optimizer, ``client_state``
with the trainer's own state) plus ``gatesweep_meta.json`` written last. A checkpoint is first
written under ``.staging-step_XXXXXXXX/`` and then *renamed* into place (atomic on one file
system), so a crash mid-save leaves only a staging directory, which is never loaded and is
removed by the next save. The newest ``keep`` (2) complete checkpoints are kept.

Every file is fsynced before the marker is written, so "complete" also means durable. The
marker records the run's spec fingerprint: ``check_dir`` refuses a directory of another run
*before* DeepSpeed starts (loading another architecture's weights would fail inside torch with
a size-mismatch traceback). Every file is unpickled weights-only (``weights_only_load``): a
planted file that names code is refused like a damaged one. A complete checkpoint that still cannot
be loaded (a file damaged
after the save) is skipped with a warning for the next older one; when none loads, ``load``
raises one ValueError that names each checkpoint and its error.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import pickle
import re
import shutil
from pathlib import Path
from typing import Any, cast

import torch.distributed as tdist

log = logging.getLogger(__name__)

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


def _meta(path: Path) -> dict[str, Any]:
    """The marker of a complete checkpoint ({} when it is not JSON: an old or damaged one)."""
    try:
        meta = json.loads((path / META).read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_dir(checkpoint_dir: str | Path, fingerprint: str) -> None:
    """Raise ValueError (naming ``checkpoint_dir``) unless it can hold this run's checkpoints:
    a directory (or a path that can become one) holding no checkpoint of another spec."""
    root = Path(checkpoint_dir)
    if root.exists() and not root.is_dir():
        raise ValueError(f"checkpoint_dir: {str(root)!r} is a file, not a directory")
    base = _first_existing(root.absolute())
    if not base.is_dir():
        raise ValueError(f"checkpoint_dir: {str(root)!r} cannot be created: {str(base)!r} is "
                         f"a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ValueError(f"checkpoint_dir: {str(base)!r} is not writable (permissions)")
    found = latest_checkpoint(root)
    if found is None:
        return
    theirs = _meta(found[1]).get("fingerprint")
    if theirs is not None and theirs != fingerprint:  # None: older marker; load() checks it
        raise ValueError(f"checkpoint_dir: {str(root)!r} holds a checkpoint of a different run "
                         f"({found[1].name}: its spec fingerprint differs); use an empty "
                         f"directory")


def _fsync_tree(path: Path) -> None:
    for dirpath, _, filenames in os.walk(path):
        for name in filenames:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


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
    _fsync_tree(written)  # DeepSpeed's files reach the disk before the marker says complete
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


def discard(path: str | Path) -> None:
    """Remove one complete checkpoint: its marker first, so a crash midway leaves an
    incomplete directory (never loaded, like a staging one) rather than a damaged one."""
    p = Path(path)
    (p / META).unlink(missing_ok=True)
    _fsync_dir(p)
    shutil.rmtree(p, ignore_errors=True)


def prune(checkpoint_dir: str | Path, keep: int = 2) -> None:
    """Delete all but the newest ``keep`` complete checkpoints and any stale staging dirs."""
    root = Path(checkpoint_dir)
    for _, path in complete_checkpoints(root)[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
    for p in root.glob(STAGING + "*"):
        shutil.rmtree(p, ignore_errors=True)


def save(engine: Any, checkpoint_dir: str | Path, step: int, client_state: dict[str, Any],
         keep: int = 2, fingerprint: str | None = None) -> Path:
    """Save the engine + ``client_state`` as the checkpoint of ``step`` (collective call);
    ``fingerprint`` (the spec's) goes into the marker for ``check_dir``."""
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
        meta: dict[str, Any] = {"step": step}
        if fingerprint is not None:
            meta["fingerprint"] = fingerprint
        final = _publish(root, staging, tag, meta)
        prune(root, keep)
    _barrier()
    return final


# The only non-tensor classes DeepSpeed 0.19 pickles into a checkpoint (ZeRO 0-3, fp32/bf16,
# MoE; found with torch.serialization.get_unsafe_globals_in_checkpoint): plain value objects
# whose unpickling runs no code. Anything else a file names is refused, never imported.
SAFE_GLOBALS = ("deepspeed.runtime.fp16.loss_scaler.LossScaler",
                "deepspeed.runtime.zero.config.ZeroStageEnum",
                "deepspeed.utils.tensor_fragment.fragment_address")


def _safe_classes() -> list[Any]:
    out = []
    for name in SAFE_GLOBALS:
        mod, _, attr = name.rpartition(".")
        out.append(getattr(importlib.import_module(mod), attr))
    return out


def weights_only_load(path: str | Path, map_location: Any = None) -> Any:
    """``torch.load`` that unpickles only tensors, plain containers and SAFE_GLOBALS: a
    checkpoint directory is input (a shared DB can point a rerun at one), and a full unpickle
    runs whatever code the file names. A file that names anything else is a ValueError."""

    import torch

    with torch.serialization.safe_globals(_safe_classes()):
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as exc:
            raise ValueError(f"checkpoint {path}: refusing to unpickle objects other than "
                             "tensors and plain values (weights-only load): "
                             f"{str(exc).splitlines()[0][:300]}") from None


def check_pickles(tag_dir: str | Path) -> None:
    """Refuse (ValueError) a checkpoint whose files name any class or function a weights-only
    load would not allow, without unpickling anything: the gate in front of readers that
    unpickle fully (DeepSpeed's zero_to_fp32)."""
    import torch

    allowed = set(SAFE_GLOBALS)
    for f in sorted(Path(tag_dir).glob("*.pt")):
        bad = [g for g in torch.serialization.get_unsafe_globals_in_checkpoint(f)
               if g not in allowed]
        if bad:
            raise ValueError(f"checkpoint {f}: refusing to unpickle objects other than tensors "
                             f"and plain values (it names {', '.join(bad[:5])})")


class _WeightsOnly:
    """DeepSpeed's checkpoint engine with its ``load`` replaced by weights_only_load (its own
    passes ``weights_only=False``): every file ``engine.load_checkpoint`` reads -- model,
    optimizer, MoE experts, ZeRO partitions -- goes through it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def load(self, path: str, map_location: Any = None) -> Any:
        return weights_only_load(path, map_location)


def _load_tag(engine: Any, path: Path) -> tuple[Any, Any]:
    inner = engine.checkpoint_engine
    engine.checkpoint_engine = _WeightsOnly(inner)
    try:
        return cast("tuple[Any, Any]", engine.load_checkpoint(str(path.parent), tag=path.name))
    finally:
        engine.checkpoint_engine = inner


def load(engine: Any, checkpoint_dir: str | Path) -> tuple[int, dict[str, Any]] | None:
    """Load the newest loadable complete checkpoint into ``engine``; (step, client_state) or
    None when there is none. In a one-process run a damaged one is skipped (a warning) for the
    next older one, whose load overwrites whatever the failed attempt had already copied into
    the engine; with several ranks the first failure raises (every rank must load one tag)."""
    found = complete_checkpoints(checkpoint_dir)
    if not found:
        return None
    failures: list[str] = []
    for step, path in reversed(found):
        try:
            load_path, client_state = _load_tag(engine, path)  # weights-only
        except Exception as exc:  # noqa: BLE001 - torch/DeepSpeed raise anything on bad files
            load_path, error = None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        else:
            error = "DeepSpeed found no checkpoint files"
        if load_path is not None:
            if failures:
                log.warning("checkpoint_dir: resumed from %s; newer checkpoint(s) could not be "
                            "loaded: %s", path.name, "; ".join(failures))
            return step, client_state or {}
        failures.append(f"{path.name}: {error}")
        if tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1:
            break  # ranks read different shards: falling back alone could split them apart
    raise ValueError(f"checkpoint_dir: no checkpoint in {str(checkpoint_dir)!r} can be loaded "
                     f"({'; '.join(failures)}); move them away to start the run afresh")
