"""Files the user asked a command to write (``query --out``, ``export --out``).

Each file is written to a temporary name beside its target and renamed into place only when
every file of the command is complete, so a failure (a full disk, a bad path, a polars error)
leaves no half-written or mixed-vintage output. A path the environment refuses is one line
naming it (UserError, exit 2), never an OSError traceback.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

from contract.errors import UserError

Writer = Callable[[Path], None]


def out_dir(path: Path) -> Path:
    """``path`` as an output directory (created when missing)."""
    if str(path) == "-":
        raise UserError("--out -: this command writes several files; expected a directory")
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
    """A new path or a regular file (followed through symlinks): the rename would otherwise
    turn a device, FIFO or socket (``--out /dev/null`` as root) into a regular file."""
    if not path.parent.is_dir():
        what = "is not a directory" if path.parent.exists() else "does not exist"
        raise UserError(f"--out {path}: {path.parent} {what}")
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UserError(f"--out {path}: cannot be checked ({exc.strerror or exc})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UserError(f"--out {path}: is a directory; expected a file path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(f"--out {path}: is a {_kind(st.st_mode)}, not a regular file; "
                        "expected a new or regular file path (--out - writes to stdout)")
    if st is None and path.is_symlink():
        raise UserError(f"--out {path}: is a dangling symbolic link; expected a new or "
                        "regular file path")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _target_of(path: Path, tmps: Mapping[Path, Path]) -> Path:
    return next((p for p, t in tmps.items() if t == path), path)
