"""A file cache for text that is inlined into reports (the Vega bundle, vega.py) that nobody
else can plant or swap: whatever is read here ends up as a <script> in an HTML report.

- the folder (``$XDG_CACHE_HOME/gatesweep/vega``, else ``~/.cache/gatesweep/vega``) is used only
  when it is a real directory (not a symbolic link), owned by this user and closed to group and
  others (0700, created so); one another user made first (in a shared cache home such as
  /tmp) is not trusted, and nothing is cached;
- an entry is opened without following a symbolic link (O_NOFOLLOW), must be a regular file of
  this user, and carries the SHA-256 of its text on its first line: a truncated, edited or
  foreign entry is ignored (and rebuilt), never inlined;
- an entry is written through a random temp name in that folder (O_CREAT|O_EXCL, 0600, as
  mkstemp does) and renamed over the entry (a rename replaces a link there, it never writes
  through one); both relative to the folder's descriptor, opened and checked once.

A cache that cannot be used costs the rebuild (~2 s), nothing else.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

HEADER = "// sha256:"  # the first line of an entry: HEADER + hex digest of the rest
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


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


@contextlib.contextmanager
def _opened() -> Iterator[int | None]:
    """The cache folder opened (O_NOFOLLOW | O_DIRECTORY), created 0700 when missing; None
    when it is not private (a link, a file, another owner, open to others) or cannot be made.
    Entries are then opened and renamed relative to this descriptor, so the folder checked is
    the folder used even if a path above it changes meanwhile."""
    path = folder()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC)
    except OSError:
        yield None
        return
    try:
        yield fd if _private(os.fstat(fd)) else None
    finally:
        os.close(fd)


def private_folder() -> Path | None:
    """The cache folder if it is private (created so when missing), else None."""
    with _opened() as fd:
        return None if fd is None else folder()


def read(name: str) -> str | None:
    """The text stored under ``name`` if its entry is trusted and intact, else None."""
    with _opened() as where:
        if where is None:
            return None
        try:  # a symbolic link there: ELOOP
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=where)
        except OSError:
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
    body = text.encode("utf-8")
    data = (HEADER + hashlib.sha256(body).hexdigest() + "\n").encode("ascii") + body
    tmp = f".entry-{secrets.token_hex(8)}.tmp"  # mkstemp's rule, relative to the folder
    with _opened() as where:
        if where is None:
            return
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC,
                         0o600, dir_fd=where)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, name, src_dir_fd=where, dst_dir_fd=where)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=where)
