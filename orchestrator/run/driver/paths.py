"""THE rule for where a command may write or delete run files: inside ``--storage`` only.

A run's checkpoints live at ``<storage>/<sweep>/<run>/checkpoints``, where sweep and run are
the run's identity as its DB row holds it (never a path a stored config or artifact names:
any writer of a shared results DB can change those, and a rerun's trainer writes and prunes
there). Every such path is resolved (symlinks followed) and must lie inside the resolved
storage root: a symlinked sweep or run folder leading elsewhere is refused in one line, not
followed. ``remove_dir`` is the one delete (``rerun --fresh``, re-queued runs of other code);
the trial's checkpoint dir comes from ``checkpoint_dir``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from contract.errors import UserError

DEFAULT_STORAGE = Path("runs")


def storage_arg(raw: str | Path) -> Path:
    """``--storage`` as typed: an empty string is refused (Path('') is '.', the working
    directory, where checkpoints were then written and deleted)."""
    if isinstance(raw, Path):  # a default, already a path
        return raw
    if not raw.strip():
        raise UserError(f"{raw!r} is an empty path; expected a directory (default "
                        f"./{DEFAULT_STORAGE})")
    return Path(raw)


def storage_root(storage: Path | None) -> Path:
    """The resolved storage root (default ./runs); a file there is refused."""
    root = (storage if storage is not None else DEFAULT_STORAGE).resolve()
    if root.exists() and not root.is_dir():
        raise UserError(f"--storage {storage}: is a file; expected a directory (it holds "
                        "<sweep>/<run>/checkpoints)")
    return root


def checkpoint_dir(storage: Path, sweep: str, run_name: str) -> Path:
    """<storage>/<sweep>/<run-name>/checkpoints, resolved, kept outside Tune's trial dirs so
    a rerun (a new Tune experiment) resumes from it. ``sweep`` and ``run_name`` must be single
    folder names (contract.config.RunSpec checks a spec's; a DB row's are text anyone can
    write): a path that leaves ``storage`` (``..``, ``/``, a symlink on the way) is refused."""
    root = storage.resolve()
    ckpt = (root / sweep / run_name / "checkpoints").resolve()
    if not ckpt.is_relative_to(root) or ckpt.parent.parent.parent != root:
        raise UserError(f"run {run_name}: its checkpoint dir {root / sweep / run_name} leads "
                        f"to {ckpt}, outside --storage {root} (a symbolic link or '..' on the "
                        "way); refusing to write or delete there")
    return ckpt


def remove_dir(ckpt: Path, storage: Path, say: Callable[[str], object]) -> None:
    """Delete the checkpoint dir ``ckpt`` of one run, only when it is a real directory (not a
    symlink) inside ``storage`` (both resolved), saying what is removed; anything else is one
    line and nothing is deleted."""
    if not (ckpt.exists() or ckpt.is_symlink()):
        return
    root = storage.resolve()
    if ckpt.is_symlink() or not ckpt.is_dir() or not ckpt.resolve().is_relative_to(root):
        raise UserError(f"{ckpt} is not a directory inside --storage {root}; nothing was "
                        "deleted")
    n = sum(1 for c in ckpt.iterdir() if c.name.startswith("step_"))
    say(f"removing {ckpt} ({n} checkpoint(s))")
    shutil.rmtree(ckpt)
