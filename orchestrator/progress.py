"""Live progress of a submit, read from the DB (the truth), not from Ray.

On a terminal: a rich table (run, state, step, loss) refreshed every ``interval`` seconds.
Elsewhere (CI logs, pipes): one line per state change, so logs stay readable.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

STYLE = {"pending": "dim", "running": "cyan", "succeeded": "green", "failed": "red",
         "diverged": "yellow", "cancelled": "magenta", "lost": "red"}


class Progress:
    """Context manager: polls the DB in a daemon thread while the sweep runs."""

    def __init__(self, db: Any, run_ids: list[int], console: Console,
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
        self._tick()  # final state
        if self._live is not None:
            self._live.__exit__(*exc)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - progress is cosmetic; never kill the sweep
                continue

    def snapshot(self) -> list[dict[str, Any]]:
        rows = [self.db.run(i) for i in self.ids]
        last = latest_points(self.db, self.ids, "train/loss")
        return [{"id": r.id, "name": r.name, "status": r.status,
                 "step": last.get(r.id, (None, None))[0], "loss": last.get(r.id, (None, None))[1]}
                for r in rows if r is not None]

    def _tick(self) -> None:
        rows = self.snapshot()
        if self._live is not None:
            self._live.update(self._table(rows))
            return
        elapsed = time.monotonic() - self.t0
        for r in rows:
            before = self._seen.get(r["id"], "pending")  # queued runs are not news
            self._seen[r["id"]] = r["status"]
            if before != r["status"]:
                extra = f" step {r['step']} loss {r['loss']:.4g}" if r["loss"] is not None else ""
                self.console.print(f"[{elapsed:6.1f}s] {r['name']}: {r['status']}{extra}",
                                   highlight=False)

    def _table(self, rows: list[dict[str, Any]]) -> Table:
        done = sum(r["status"] not in ("pending", "running") for r in rows)
        t = Table(title=f"{done}/{len(rows)} runs finished - "
                        f"{time.monotonic() - self.t0:.0f}s elapsed")
        for c in ("run", "state", "step", "train/loss"):
            t.add_column(c, justify="right" if c in ("step", "train/loss") else "left")
        for r in rows:
            st = r["status"]
            t.add_row(r["name"], f"[{STYLE.get(st, '')}]{st}[/]",
                      "" if r["step"] is None else str(r["step"]),
                      "" if r["loss"] is None else f"{r['loss']:.4g}")
        return t


def latest_points(db: Any, run_ids: list[int], name: str) -> dict[int, tuple[int, float]]:
    """{run_id: (step, value)} of the newest point of metric ``name``."""
    if not run_ids:
        return {}
    ids = ",".join(str(int(i)) for i in run_ids)
    frame = db.query(
        "SELECT m.run_id, m.step, m.value FROM metrics m JOIN (SELECT run_id, MAX(step) AS s "
        f"FROM metrics WHERE name = '{name}' AND run_id IN ({ids}) GROUP BY run_id) x "
        f"ON m.run_id = x.run_id AND m.step = x.s WHERE m.name = '{name}'")
    return {int(r[0]): (int(r[1]), float(r[2]) if r[2] is not None else float("nan"))
            for r in frame.iter_rows()}
