"""Which process holds a SQLite results DB's write lock (Linux): a fact SQLite never reports.

In WAL mode a writer holds a POSIX record lock on byte 120 of the DB's ``-shm`` file (the unix
VFS's WAL_WRITE_LOCK: ``UNIX_SHM_BASE`` = 120) for exactly as long as its write transaction,
and the kernel lists it in /proc/locks with the holder's pid. Our transactions last
milliseconds; a process frozen inside one (SIGSTOP, a swap storm, a hung file system) holds the
lock until it wakes or dies, and every other writer waits for it (busy timeout 30 s).
PostgreSQL needs none of this: its server ends such a session itself (engine.py,
``PG_IDLE_IN_TX_TIMEOUT_S``).
"""

from __future__ import annotations

import os
from pathlib import Path

WAL_WRITE_LOCK_BYTE = 120
PROC_LOCKS = Path("/proc/locks")


def _inode_key(path: Path) -> str | None:
    """``MAJ:MIN:INODE`` as /proc/locks writes a file's identity (hex device numbers)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"


def _covers(start: str, end: str, byte: int) -> bool:
    return int(start) <= byte and (end == "EOF" or byte <= int(end))


def write_lock_holder(db_file: str | Path) -> int | None:
    """The pid holding the WAL write lock of the SQLite file ``db_file`` now, or None: nobody
    holds it, or it cannot be told here (no /proc/locks, a file system whose /proc/locks
    identity differs from stat's, e.g. overlayfs: then the caller learns nothing, as before)."""
    key = _inode_key(Path(f"{db_file}-shm"))
    if key is None:
        return None
    try:
        text = PROC_LOCKS.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        # "1: POSIX  ADVISORY  WRITE 27396 fe:00:2147079 120 120"; "1: -> ..." is a waiter
        f = line.split()
        if len(f) == 8 and f[1] == "POSIX" and f[3] == "WRITE" and f[5] == key \
                and _covers(f[6], f[7], WAL_WRITE_LOCK_BYTE):
            return int(f[4])
    return None
