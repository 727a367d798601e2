"""LiveMixin: runs in flight -- step, last loss, tokens/s, ETA, heartbeat age, holder.

One read for every live view (``orchestrator submit``'s progress, ``orchestrator status``, the
dashboard's Overview), so "what is running and is it alive" is computed in one place. Five
small queries (runs, their newest attempts, the newest train/loss and tokens/s points, the
first step each current attempt logged), joined in Python (a few hundred rows at most).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy import Engine, and_, func, or_, select

from contract.metrics import TRAIN_LOSS, TRAIN_TOKENS_PER_S
from contract.states import (
    LIVE,
    WAITING,
    RunStatus,
    parse_status,
    stale_after_s,
    status_group,
)
from results_db.schema.tables import Attempt, Metric, Run, Sweep, utcnow

# The contract's columns, in order; then extras: owner (who holds/queued it), lease_s_left
# (seconds left on the driver's lease of a queued run: negative = its driver is gone),
# attempt (number), fault (the newest attempt's fault class), started (the newest attempt's),
# stale_after_s (the running attempt's threshold, from its heartbeat interval), stale (its
# heartbeat is older than that: probably dead), group (states.status_group of the status).
LIVE_COLUMNS = ("run_id", "name", "sweep", "variant", "status", "attempt_id", "step",
                "steps_total", "last_loss", "tokens_per_s", "eta_s", "heartbeat_age_s")
EXTRA_COLUMNS = ("owner", "lease_s_left", "attempt", "fault", "started", "stale_after_s",
                 "stale", "group")
DEFAULT_STATES = tuple(sorted(s.value for s in LIVE | WAITING))  # pending, lost, running


class LiveMixin:
    if TYPE_CHECKING:  # ResultsDB's property (an attribute annotation would clash with it)
        @property
        def reader(self) -> Engine: ...

    def live_runs(self, sweep: str | None = None, *, run_ids: Sequence[int] | None = None,
                  statuses: Iterable[str] | None = DEFAULT_STATES) -> pl.DataFrame:
        """One row per run of ``sweep`` (or all sweeps, or ``run_ids``) in ``statuses``
        (default: running, pending, lost; None: every status). ``step``/``last_loss``: the
        newest train/loss point; ``eta_s`` from the current attempt's own pace (running runs
        only); ``heartbeat_age_s``: seconds since the running attempt's last heartbeat."""
        runs = self._live_run_rows(sweep, run_ids, statuses)
        ids = [r["run_id"] for r in runs]
        if not ids:
            return pl.DataFrame(schema=_schema())
        now = utcnow()
        atts = {r["run_id"]: r for r in self._live_attempts(ids)}
        loss = {r["run_id"]: r for r in self._latest_points(ids, TRAIN_LOSS)}
        tps = {r["run_id"]: r for r in self._latest_points(ids, TRAIN_TOKENS_PER_S)}
        first = {r["attempt_id"]: r["first_step"]
                 for r in self._first_steps([a["attempt_id"] for a in atts.values()])}
        rows = []
        for r in runs:
            a = atts.get(r["run_id"], {})
            pt, tp = loss.get(r["run_id"], {}), tps.get(r["run_id"], {})
            rows.append(_derive(r, a, pt, tp.get("value"), first.get(a.get("attempt_id")), now))
        return pl.DataFrame(rows, schema=_schema())

    def run_statuses(self, run_ids: Sequence[int], *, except_status: str | None = None,
                     keep: Iterable[int] = ()) -> dict[int, str]:
        """{run id: status} of ``run_ids`` (those that exist): one light read, for a poller
        that asks ``live_runs`` only about the runs whose status changed. ``except_status``
        leaves out the runs in that status (filtered by the server: a sweep's queue of
        pending runs is most of it) unless their id is in ``keep``."""
        if not run_ids:
            return {}
        q = select(Run.id, Run.status).where(Run.id.in_([int(i) for i in run_ids]))
        if except_status is not None:
            st = parse_status(except_status).value
            kept = [int(i) for i in keep]
            q = q.where(Run.status != st if not kept else
                        or_(Run.status != st, Run.id.in_(kept)))
        with self.reader.connect() as conn:  # tuples: this runs every 2 s over the sweep
            return {int(i): str(st) for i, st in conn.execute(q)}

    def _rows(self, q: Any) -> list[dict[str, Any]]:
        with self.reader.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(q)]

    def _live_run_rows(self, sweep: str | None, run_ids: Sequence[int] | None,
                       statuses: Iterable[str] | None) -> list[dict[str, Any]]:
        q = (select(Run.id.label("run_id"), Run.name, Sweep.name.label("sweep"), Run.variant,
                    Run.status, Run.steps.label("steps_total"), Run.owner.label("run_owner"),
                    Run.lease_until).join(Sweep, Sweep.id == Run.sweep_id).order_by(Run.id))
        if sweep is not None:
            q = q.where(Sweep.name == sweep)
        if run_ids is not None:
            q = q.where(Run.id.in_([int(i) for i in run_ids]))
        if statuses is not None:
            q = q.where(Run.status.in_([parse_status(s).value for s in statuses]))
        return self._rows(q)

    def _live_attempts(self, ids: list[int]) -> list[dict[str, Any]]:
        """The newest attempt of each run."""
        top = (select(Attempt.run_id, func.max(Attempt.number).label("n"))
               .where(Attempt.run_id.in_(ids)).group_by(Attempt.run_id).subquery())
        return self._rows(select(
            Attempt.run_id, Attempt.id.label("attempt_id"), Attempt.number.label("attempt"),
            Attempt.status.label("attempt_status"), Attempt.owner, Attempt.fault,
            Attempt.started, Attempt.heartbeat, Attempt.heartbeat_s).join(
            top, and_(top.c.run_id == Attempt.run_id, top.c.n == Attempt.number)))

    def _latest_points(self, ids: list[int], name: str) -> list[dict[str, Any]]:
        """(run_id, step, value) of the newest point of metric ``name`` per run."""
        top = (select(Metric.run_id, func.max(Metric.step).label("s"))
               .where(Metric.run_id.in_(ids), Metric.name == name)
               .group_by(Metric.run_id).subquery())
        return self._rows(select(Metric.run_id, Metric.step, Metric.value).join(
            top, and_(top.c.run_id == Metric.run_id, top.c.s == Metric.step))
            .where(Metric.name == name))

    def _first_steps(self, attempt_ids: list[int]) -> list[dict[str, Any]]:
        """The first train/loss step each attempt logged (its pace starts there)."""
        if not attempt_ids:
            return []
        return self._rows(select(Metric.attempt_id, func.min(Metric.step).label("first_step"))
                          .where(Metric.attempt_id.in_(attempt_ids), Metric.name == TRAIN_LOSS)
                          .group_by(Metric.attempt_id))


def _age_s(ts: Any, now: datetime) -> float | None:
    if ts is None:
        return None
    if isinstance(ts, str):
        ts = datetime.fromisoformat(ts)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=now.tzinfo)
    return float((now - ts).total_seconds())


def _derive(r: dict[str, Any], a: dict[str, Any], pt: dict[str, Any], tps: float | None,
            first_step: int | None, now: datetime) -> dict[str, Any]:
    """One output row: heartbeat age, ETA from the attempt's own pace, the holder."""
    running = r["status"] == RunStatus.RUNNING and a.get("attempt_status") == RunStatus.RUNNING
    step, total = pt.get("step"), r["steps_total"]
    hb_age = _age_s(a.get("heartbeat") or a.get("started"), now) if running else None
    limit = stale_after_s(a.get("heartbeat_s")) if running else None
    stale = None if limit is None else hb_age is not None and hb_age > limit
    eta = None
    if running and not stale and step is not None and total:
        # a stale attempt (its driver or worker dead) has no ETA: its pace over a wall clock
        # that keeps running while nothing trains would make the ETA grow without end
        done = step - (first_step if first_step is not None else step)
        elapsed = _age_s(a.get("started"), now) or 0.0
        if done > 0 and elapsed > 0:
            eta = max(0.0, (total - step) * elapsed / done)
    left = _age_s(r["lease_until"], now)
    return {"run_id": r["run_id"], "name": r["name"], "sweep": r["sweep"],
            "variant": r["variant"], "status": r["status"], "attempt_id": a.get("attempt_id"),
            "step": step, "steps_total": total, "last_loss": pt.get("value"),
            "tokens_per_s": tps, "eta_s": eta, "heartbeat_age_s": hb_age,
            "owner": a.get("owner") if running else r["run_owner"],
            "lease_s_left": None if left is None else -left, "attempt": a.get("attempt"),
            "fault": a.get("fault"), "started": a.get("started"), "stale_after_s": limit,
            "stale": stale,
            "group": status_group(r["status"])}


def _schema() -> dict[str, Any]:
    return {"run_id": pl.Int64, "name": pl.Utf8, "sweep": pl.Utf8, "variant": pl.Utf8,
            "status": pl.Utf8, "attempt_id": pl.Int64, "step": pl.Int64,
            "steps_total": pl.Int64, "last_loss": pl.Float64, "tokens_per_s": pl.Float64,
            "eta_s": pl.Float64, "heartbeat_age_s": pl.Float64, "owner": pl.Utf8,
            "lease_s_left": pl.Float64, "attempt": pl.Int64, "fault": pl.Utf8,
            "started": pl.Datetime(time_zone="UTC"), "stale_after_s": pl.Float64,
            "stale": pl.Boolean, "group": pl.Utf8}
