"""A real process inside a SQLite write transaction, for the tests of who holds the lock.

It opens the DB through results_db (WAL, BEGIN IMMEDIATE), updates a row and stays inside the
transaction until ``release()``: like a ``sqlite3`` shell left mid-transaction. After the
commit it stays alive, holding nothing, until ``close()``.
"""

from __future__ import annotations

import subprocess
import sys

_HOLDER = """
import sys
import results_db
db = results_db.open(sys.argv[1], migrate=False)
with db.engine.begin() as c:
    c.exec_driver_sql("UPDATE sweeps SET description = 'x'")
    print("held", flush=True)
    sys.stdin.readline()
print("done", flush=True)
sys.stdin.readline()
"""


class LockHolder:
    """Context manager: the process holds the write lock of ``url`` once constructed."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, url], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        if self._line() != "held":
            self.close()
            raise RuntimeError(f"the lock holder never took the lock of {url}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def release(self) -> None:
        """Commit (the lock is free when this returns); the process stays alive."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        if self._line() != "done":
            raise RuntimeError("the lock holder did not commit")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def __enter__(self) -> LockHolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
