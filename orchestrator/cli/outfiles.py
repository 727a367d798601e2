"""THE writer of files a user asked a command for (``query --out``, ``export --out``,
``report --out``).

Each file is written through a temporary file created exclusively in its target's directory
(``tempfile.mkstemp``: a random name opened with O_CREAT|O_EXCL, so a symlink planted there by
a co-writer of the directory is never followed) and written through that descriptor, never
reopened by name. When every file of the command is complete they are renamed into place
(``os.replace``: atomic), so a failure (a full disk, a bad path, a polars error) leaves no
half-written or mixed-vintage output. A symbolic link at a target is refused (the rename
would replace the link, and following it writes wherever it points) unless the user passes
``--replace-symlink``, which replaces the link and leaves what it pointed to alone. A path
the environment refuses is one line naming it (UserError, exit 2), never an OSError
traceback.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from contract.errors import UserError

Writer = Callable[[BinaryIO], object]  # writes one file's bytes to the open temporary file


def out_dir(path: Path, follow_symlink: bool = False) -> Path:
    """``path`` as an output directory (created when missing). A symbolic link there is
    refused unless ``follow_symlink`` (--replace-symlink): files written through it land
    wherever it points (a planted ``REPORT_files`` link put the report's figures, by their
    fixed names, into another directory)."""
    if str(path) == "-":
        raise UserError("--out -: this command writes several files; expected a directory")
    if path.is_symlink() and not follow_symlink:
        raise UserError(f"--out {path}: is a symbolic link (to {os.readlink(path)}); refusing "
                        "to write files through it: pass --replace-symlink to write into its "
                        "target, or use a real directory")
    if path.exists() and not path.is_dir():
        mode = path.stat().st_mode
        what = "file" if stat.S_ISREG(mode) else _kind(mode)  # a FIFO is not "a file"
        raise UserError(f"--out {path}: is a {what}; expected a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {path}: the directory cannot be created "
                        f"({exc.strerror or exc})") from None
    return path


def write_files(files: Mapping[Path, Writer], replace_symlink: bool = False) -> None:
    """Write every file (``writer(binary file object)``), then move them all into place."""
    tmps: dict[Path, Path] = {}
    try:
        for path in files:
            check_target(path, replace_symlink)
        mode = _default_mode()
        for path, writer in files.items():
            fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            tmps[path] = Path(name)
            with os.fdopen(fd, "wb") as fh:
                writer(fh)
                os.fchmod(fh.fileno(), mode)  # mkstemp's 0600 -> what a new file gets
        for path, tmp in tmps.items():
            os.replace(tmp, path)
    except OSError as exc:
        bad = Path(exc.filename) if exc.filename else next(iter(files))
        raise UserError(f"--out {_target_of(bad, tmps)}: cannot be written "
                        f"({exc.strerror or exc})") from None
    finally:
        for tmp in tmps.values():
            tmp.unlink(missing_ok=True)


def _default_mode() -> int:
    """0666 less the umask: the mode ``open(path, 'w')`` gives a new file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def check_target(path: Path, replace_symlink: bool) -> None:
    """A new path or a regular file: the rename would otherwise turn a device, FIFO or socket
    (``--out /dev/null`` as root) into a regular file, or silently replace a symbolic link."""
    if not path.parent.is_dir():
        what = "is not a directory" if path.parent.exists() else "does not exist"
        raise UserError(f"--out {path}: {path.parent} {what}")
    try:
        st = path.stat()  # followed through a link: a link to a FIFO is still refused
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UserError(f"--out {path}: cannot be checked ({exc.strerror or exc})") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UserError(f"--out {path}: is a directory; expected a file path")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UserError(f"--out {path}: is a {_kind(st.st_mode)}, not a regular file; "
                        "expected a new or regular file path (--out - writes to stdout)")
    if path.is_symlink() and not replace_symlink:
        where = "dangling " if st is None else ""
        raise UserError(f"--out {path}: is a {where}symbolic link (to {os.readlink(path)}); "
                        "refusing to replace it: pass --replace-symlink to replace the link "
                        "with the file, or write to its target's path")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
                       (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return name
    return "special file"


def _target_of(path: Path, tmps: Mapping[Path, Path]) -> Path:
    return next((p for p, t in tmps.items() if t == path), path)
