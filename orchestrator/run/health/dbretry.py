"""Riding out a results-DB outage: retry with backoff for a bounded time.

A database restart (PostgreSQL stopped for 20 s) or a disk that fills and is freed again must
not abandon a sweep. The DB calls on the driver's and the trials' critical paths (claims, the
Tune callback's records, metric flushes, attempt ends) go through ``with_db_retry``: it retries
``results_db.DBUnavailable`` (the one error that means "the DB cannot be used now") with
exponential backoff until ``wait_s`` seconds have passed since the first failure
(``GATESWEEP_DB_WAIT_S``, default 300 s), then raises ``DBOutage``. Other errors (a bug, a
constraint) are never retried. While a call waits, its caller waits: a trial pauses at its
next flush (it never checkpoints past its last written step), the driver's Tune loop pauses in
its callback, so nothing is scheduled onto a DB that cannot record it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from contract import env
from results_db import DBUnavailable

T = TypeVar("T")
DB_WAIT_ENV = "GATESWEEP_DB_WAIT_S"
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.5, 10.0


class DBOutage(DBUnavailable):
    """The results DB stayed unusable for longer than the bound; the message says for how
    long, why, and what to run once it is back."""


def db_wait_s() -> float:
    """GATESWEEP_DB_WAIT_S (seconds >= 0; 0: do not wait), default 300 (contract/env.py)."""
    return env.seconds(DB_WAIT_ENV)


def with_db_retry(fn: Callable[[], T], what: str, wait_s: float,
                  say: Callable[[str], None] | None = None) -> T:
    """``fn()``, retried while it raises DBUnavailable, for at most ``wait_s`` seconds
    (backoff 0.5 s doubling to 10 s); then DBOutage naming ``what``. ``say`` hears one line
    when the wait starts and one when it ends. ``wait_s`` 0: the first error as it is."""
    if not 0 <= wait_s < math.inf:  # NaN passed every comparison below: a spin, no sleep
        raise ValueError(f"with_db_retry: wait_s={wait_s!r}; expected finite seconds >= 0")
    deadline, backoff, first = None, FIRST_BACKOFF_S, None
    while True:
        try:
            out = fn()
        except DBUnavailable as exc:
            if wait_s <= 0:
                raise  # no waiting asked for: the error as it is
            now = time.monotonic()
            if deadline is None:
                deadline, first = now + wait_s, now
                if say is not None and wait_s > 0:
                    say(f"{exc}; {what}: waiting up to {wait_s:g} s for the DB")
            if now >= deadline:
                raise DBOutage(f"{exc} (for {now - (first or now):.0f} s, the limit is "
                               f"{wait_s:g} s: {DB_WAIT_ENV}); {what} gave up") from exc
            time.sleep(min(backoff, max(0.0, deadline - now)))
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            continue
        if first is not None and say is not None:
            say(f"{what}: the results DB answers again after "
                f"{time.monotonic() - first:.0f} s")
        return out



def cause(text: str) -> str:
    """The DB's own error in a DBOutage's text, without the waiting that with_db_retry added
    (" (for N s, the limit is ...) ... gave up"): what an exit line names as the cause."""
    return text.split(" (for ")[0].rstrip(".")


@dataclass
class OutageState:
    """The driver's view of the DB (plain fields: Tune pickles its stopper and callbacks).
    The lease keeper reports each tick's outcome, the DB callback reports giving up; the
    Tune stopper (scheduler) ends the sweep once ``expired``. Expiry latches: once anyone has
    seen it (the stopper has told Tune to stop), a DB that answers again a moment later does
    not undo it, so the driver always takes the give-up path (exit 2, its runs recorded lost)
    and never the normal return with runs left running and no process."""

    wait_s: float
    since: float | None = None  # time.monotonic() of the first failure in a row
    error: str = ""  # the latest failure's text
    first_error: str = ""  # the text of the failure that started the outage
    gave_up: bool = False

    def failed(self, exc: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.first_error = str(exc)
        self.error = str(exc)

    def ok(self) -> None:
        self.since = None

    def give_up(self, exc: BaseException) -> None:
        self.failed(exc)
        self.gave_up = True

    @property
    def expired(self) -> bool:
        if not self.gave_up and self.since is not None and \
                time.monotonic() - self.since >= self.wait_s:
            self.gave_up = True  # the decision stands (ok() no longer clears it)
        return self.gave_up
