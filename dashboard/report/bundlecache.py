"""A file cache for text that is inlined into reports (the Vega bundle, vega.py) that nobody
else can plant or swap: whatever is read here ends up as a <script> in an HTML report.

- the folder (``$XDG_CACHE_HOME/gatesweep/vega``, else ``~/.cache/gatesweep/vega``) is used only
  when it is a real directory (not a symbolic link), owned by this user and closed to group and
  others (0700, created so); a cache home such as /tmp, where another user could create it
  first, is not trusted and nothing is cached;
- an entry is opened without following a symbolic link (O_NOFOLLOW), must be a regular file of
  this user, and carries the SHA-256 of its text on its first line: a truncated, edited or
  foreign entry is ignored (and rebuilt), never inlined;
- an entry is written through a random temp name in that folder (mkstemp: O_CREAT|O_EXCL, 0600)
  and renamed over the entry (os.replace replaces a link there, it never writes through one).

A cache that cannot be used costs the rebuild (~2 s), nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

HEADER = "// sha256:"  # the first line of an entry: HEADER + hex digest of the rest


def folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gatesweep" / "vega"


def _private(st: os.stat_result) -> bool:
    """A directory or file of this user that no one else may write (or, for a directory,
    enter)."""
    mine = st.st_uid == os.getuid()
    if stat.S_ISDIR(st.st_mode):
        return mine and not st.st_mode & 0o077
    return mine and stat.S_ISREG(st.st_mode) and not st.st_mode & 0o022


def private_folder() -> Path | None:
    """The cache folder, created 0700 when missing; None when it is not private (a link, a
    file, another owner, open to others) or cannot be made."""
    path = folder()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    return path if stat.S_ISDIR(st.st_mode) and _private(st) else None


def read(name: str) -> str | None:
    """The text stored under ``name`` if its entry is trusted and intact, else None."""
    where = private_folder()
    if where is None:
        return None
    try:
        fd = os.open(where / name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # missing, or a symbolic link (ELOOP)
        return None
    with os.fdopen(fd, "rb") as f:
        if not _private(os.fstat(f.fileno())):
            return None
        raw = f.read()
    head, _, body = raw.partition(b"\n")
    if head != (HEADER + hashlib.sha256(body).hexdigest()).encode("ascii"):
        return None
    return body.decode("utf-8")


def write(name: str, text: str) -> None:
    """Store ``text`` under ``name`` (module docstring); silently nothing when the folder is
    not private or not writable."""
    where = private_folder()
    if where is None:
        return
    body = text.encode("utf-8")
    data = (HEADER + hashlib.sha256(body).hexdigest() + "\n").encode("ascii") + body
    try:
        fd, tmp = tempfile.mkstemp(dir=where, prefix=".entry-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, where / name)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
