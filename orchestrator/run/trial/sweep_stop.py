"""A driver's "this sweep has stopped" flag, readable by its trials on every node.

When a driver ends its sweep early (the results DB stayed unusable past GATESWEEP_DB_WAIT_S),
Tune stops its trials, but a trial that was already starting may be waiting at its claim for
the same DB. Once the DB is back it would claim its run and train for a sweep that is over,
leaving the run `running` with no driver. The flag cannot live in the DB (the DB is what
failed), so it lives in the Ray cluster's own key-value store (the GCS), which every trial
reaches: the driver sets it the moment it gives up, and a trial reads it before and right
after its claim.
"""

from __future__ import annotations

_NAMESPACE = "gatesweep"


def _key(owner: str) -> bytes:
    return f"stopped:{owner}".encode()


def mark_stopped(owner: str, reason: str) -> None:
    """Set the flag of the driver ``owner`` (no-op outside Ray: there are no trials)."""
    from ray.experimental import internal_kv

    if internal_kv._internal_kv_initialized():
        internal_kv._internal_kv_put(_key(owner), reason.encode(), overwrite=True,
                                     namespace=_NAMESPACE)


def stopped(owner: str) -> str | None:
    """Why the driver ``owner`` stopped its sweep; None while it goes on (or outside Ray)."""
    from ray.experimental import internal_kv

    if not owner or not internal_kv._internal_kv_initialized():
        return None
    try:
        got = internal_kv._internal_kv_get(_key(owner), namespace=_NAMESPACE)
    except Exception:  # noqa: BLE001 - the GCS cannot answer: nobody said stop
        return None
    return None if got is None else bytes(got).decode(errors="replace")
