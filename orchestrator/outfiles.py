"""Files the user asked a command to write (``query --out``, ``export --out``).

Each file is written to a temporary name beside its target and renamed into place only when
every file of the command is complete, so a failure (a full disk, a bad path, a polars error)
leaves no half-written or mixed-vintage output. A path the environment refuses is one line
naming it (UserError, exit 2), never an OSError traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from contract.errors import UserError

Writer = Callable[[Path], None]


def out_dir(path: Path) -> Path:
    """``path`` as an output directory (created when missing)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"--out {path}: is a file; expected a directory (it gets one Parquet "
                        "file per table)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {path}: the directory cannot be created "
                        f"({exc.strerror or exc})") from None
    return path


def write_files(files: Mapping[Path, Writer]) -> None:
    """Write every file (``writer(tmp_path)``), then move them all into place."""
    tmps: dict[Path, Path] = {}
    try:
        for path, writer in files.items():
            _check_target(path)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmps[path] = tmp
            writer(tmp)
        for path, tmp in tmps.items():
            os.replace(tmp, path)
    except OSError as exc:
        bad = Path(exc.filename) if exc.filename else next(iter(files))
        raise UserError(f"--out {_target_of(bad, tmps)}: cannot be written "
                        f"({exc.strerror or exc})") from None
    finally:
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)


def _check_target(path: Path) -> None:
    if path.is_dir():
        raise UserError(f"--out {path}: is a directory; expected a file path")
    if not path.parent.is_dir():
        what = "is not a directory" if path.parent.exists() else "does not exist"
        raise UserError(f"--out {path}: {path.parent} {what}")


def _target_of(path: Path, tmps: Mapping[Path, Path]) -> Path:
    return next((p for p, t in tmps.items() if t == path), path)
