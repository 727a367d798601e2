"""Live progress of a submit, read from the DB (the truth), not from Ray.

On a terminal: a rich table (run, state, step, loss) refreshed every ``interval`` seconds.
Elsewhere (CI logs, pipes): one line per state change, so logs stay readable.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from contract.metrics import TRAIN_LOSS
from contract.states import DONE_OK, status_group
from contract.states import RunStatus as S

if TYPE_CHECKING:
    from results_db import ResultsDB

# a run this driver will not move again: it leaves the status poll once seen so
SETTLED = DONE_OK | {S.CANCELLED}
STYLE = {S.PENDING: "dim", S.RUNNING: "cyan", S.SUCCEEDED: "green", S.FAILED: "red",
         S.DIVERGED: "yellow", S.CANCELLED: "magenta", S.LOST: "red"}


class Progress:
    """Context manager: polls the DB in a daemon thread while the sweep runs."""

    def __init__(self, db: ResultsDB, run_ids: list[int], console: Console,
                 interval: float = 2.0) -> None:
        self.db, self.ids, self.console, self.interval = db, run_ids, console, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
        self._seen: dict[int, str] = {}
        self._live: Live | None = None
        self.t0 = time.monotonic()

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            self._tick()  # final state
        except Exception:  # noqa: BLE001 - cosmetic: a DB outage must not hide the real end
            pass
        if self._live is not None:
            self._live.__exit__(*exc)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - progress is cosmetic; never kill the sweep
                continue

    def snapshot(self, ids: list[int] | None = None) -> list[dict[str, Any]]:
        """One dict per run (of ``ids``, default all): id, name, status, step, loss,
        heartbeat age (db.live_runs)."""
        live = self.db.live_runs(run_ids=self.ids if ids is None else ids, statuses=None)
        return [{"id": r["run_id"], "name": r["name"], "status": r["status"], "step": r["step"],
                 "loss": r["last_loss"], "age": r["heartbeat_age_s"]}
                for r in live.iter_rows(named=True)]

    def _tick(self) -> None:
        if self._live is not None:
            self._live.update(self._table(self.snapshot()))
            return
        # Lines say only what changed: ask for the statuses (one light read), then the live
        # rows of the changed runs alone -- live_runs of a whole 1,000-run sweep every tick
        # was a few per cent of the sweep's CPU (docs/benchmarks.md "Per-run overhead").
        # Only the runs that can still change: a run seen settled (succeeded, diverged,
        # cancelled) leaves the poll, and the server leaves out the queue's pending runs
        # unless one was seen otherwise (a re-queued run is news too).
        open_ids = [i for i in self.ids if self._seen.get(i) not in SETTLED]
        seen = [i for i in open_ids if self._seen.get(i, S.PENDING) != S.PENDING]
        changed = [i for i, st in self.db.run_statuses(open_ids, except_status=S.PENDING,
                                                       keep=seen).items()
                   if st != self._seen.get(i, S.PENDING)]
        rows = self.snapshot(changed) if changed else []
        elapsed = time.monotonic() - self.t0
        for r in rows:
            before = self._seen.get(r["id"], S.PENDING)  # queued runs are not news
            self._seen[r["id"]] = r["status"]
            if before != r["status"]:
                extra = f" step {r['step']} loss {r['loss']:.4g}" if r["loss"] is not None else ""
                self.console.print(f"[{elapsed:6.1f}s] {r['name']}: {r['status']}{extra}",
                                   highlight=False)

    def _table(self, rows: list[dict[str, Any]]) -> Table:
        done = sum(status_group(r["status"]).startswith("done") for r in rows)
        t = Table(title=f"{done}/{len(rows)} runs finished - "
                        f"{time.monotonic() - self.t0:.0f}s elapsed")
        for c in ("run", "state", "step", TRAIN_LOSS, "heartbeat"):
            t.add_column(c, justify="left" if c in ("run", "state") else "right")
        for r in rows:
            st = r["status"]
            t.add_row(r["name"], Text(st, style=STYLE.get(st, "")),  # a style, not markup
                      "" if r["step"] is None else str(r["step"]),
                      "" if r["loss"] is None else f"{r['loss']:.4g}",
                      "" if r["age"] is None else f"{r['age']:.0f} s ago")
        return t
