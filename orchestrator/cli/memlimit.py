"""The address-space limit (``ulimit -v``), said in words.

Below some limit polars, scipy and the chart renderer fail while mapping their libraries, and
what the user sees names none of it: an ImportError about a ``.so``, a Rust allocator abort, a
NameError inside polars. Measured on the 2-core VM (2026-12-07, `leaderboard`, `status` and
`report` on a 15-run sweep): the read commands work at 1.3 GiB and fail at 1 GiB (scipy's
OpenBLAS maps its thread buffers); the report's builder needs 2 GiB (vl_convert fails at 1.6).
The CLI refuses a limit below ``FLOOR_MIB`` before it loads any of them, and a child's failure
that carries a mapping sign is said as the limit, with what the command needs.
"""

from __future__ import annotations

import resource

from contract.errors import UserError

FLOOR_MIB = 1280  # every command but the report (measured above)
REPORT_MIB = 2048  # the report's builder (altair + vl_convert)
# what a failed mapping or allocation prints: Python, glibc, Rust's allocator, jemalloc
SIGNS = ("failed to map segment", "Cannot allocate memory", "memory allocation of",
         "MemoryError", "thread creation failed")


def limit_mib() -> int | None:
    """The soft RLIMIT_AS in MiB; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft // 2**20


def check(need_mib: int = FLOOR_MIB) -> None:
    """Refuse, in one line, an address-space limit below what a command needs."""
    got = limit_mib()
    if got is not None and got < need_mib:
        raise UserError(f"the address-space limit (ulimit -v) is {got} MiB; gatesweep needs at "
                        f"least {need_mib} MiB (polars, scipy and their thread pools map more "
                        f"than they use): raise it (ulimit -v {need_mib * 1024}) or unset it")


def said(text: str, what: str, need_mib: int) -> str | None:
    """``what`` ran out of memory, in words, when ``text`` carries a sign of it; else None."""
    if not any(sign in text for sign in SIGNS):
        return None
    got = limit_mib()
    limit = (f"ulimit -v is {got} MiB" if got is not None
             else "no ulimit -v is set: the machine is out of memory")
    return (f"{what} ran out of memory loading its libraries ({limit}; it needs about "
            f"{need_mib} MiB)")
