"""DecideRecordsMixin: what an adaptive (``decide:``) sweep decided, and under which rule, kept.

Three records (migration 0007_decide_records), so a verdict's history is data, not a
recomputation:
- rule changes: a ``decide:`` rule changed after the sweep had runs (``submit --change-rule``),
  with the seeds and runs it had then and the rule before and after;
- pairs: each complete (variant, baseline) seed pair of a row and the look that first read it.
  The confidence sequence reads pairs in this order, so a pair completed later (a failed
  baseline rerun) is appended, never inserted among the earlier looks;
- looks: each look's reading of each row (pairs, incomplete pairs, interval, verdict, rule
  version). A row's first decided look under the current rule is its verdict from then on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import polars as pl
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from results_db.analysis.confseq import BETTER, WITHIN, WORSE
from results_db.schema.tables import (
    DecideLook,
    DecidePair,
    DecideRuleChange,
    Run,
    Sweep,
    utcnow,
)

DECIDED = (BETTER, WORSE, WITHIN)  # confseq's settled verdicts (they never reopen)


@dataclass(frozen=True)
class RuleChange:
    """One change of a sweep's decide: rule after it had runs."""

    version: int  # the rule version this change started (the first rule is version 1)
    changed: datetime
    seeds: int  # the most seeds any row had registered when it changed
    runs: int
    before: dict[str, Any]
    after: dict[str, Any]

    def differences(self) -> list[str]:
        """"key: old -> new" for every key the change touched (nested keys dotted)."""
        a, b = _flat(self.before), _flat(self.after)
        return [f"{k}: {a.get(k, '(none)')} -> {b.get(k, '(none)')}"
                for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _flat(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in doc.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class DecideRecordsMixin:
    if TYPE_CHECKING:
        engine: Engine

        @property
        def reader(self) -> Engine: ...

    def _sweep_id(self, s: Session, sweep: str) -> int | None:
        return s.scalar(select(Sweep.id).where(Sweep.name == sweep))

    def record_rule_change(self, sweep: str, before: Mapping[str, Any],
                           after: Mapping[str, Any]) -> RuleChange:
        """Record that ``sweep``'s decide: rule changed now (it must exist); returns the change
        with its version, the seeds the sweep's rows had and its registered runs."""
        with Session(self.engine, expire_on_commit=False) as s, s.begin():
            sweep_id = self._sweep_id(s, sweep)
            if sweep_id is None:
                raise ValueError(f"record_rule_change: no sweep named {sweep!r}")
            runs = s.scalar(select(func.count()).where(Run.sweep_id == sweep_id)) or 0
            per_group = (select(func.count().label("n")).where(Run.sweep_id == sweep_id)
                         .group_by(Run.group_key).subquery())
            seeds = s.scalar(select(func.max(per_group.c.n))) or 0
            last = s.scalar(select(func.max(DecideRuleChange.version))
                            .where(DecideRuleChange.sweep_id == sweep_id)) or 1
            row = DecideRuleChange(sweep_id=sweep_id, version=last + 1, changed=utcnow(),
                                   seeds=int(seeds), runs=int(runs),
                                   before=json.loads(json.dumps(before)),
                                   after=json.loads(json.dumps(after)))
            s.add(row)
        return RuleChange(row.version, row.changed, row.seeds, row.runs, row.before, row.after)

    def rule_changes(self, sweep: str) -> list[RuleChange]:
        """The sweep's decide: rule changes, oldest first (none for a rule never changed)."""
        with Session(self.reader) as s:
            rows = s.scalars(select(DecideRuleChange).join(Sweep)
                             .where(Sweep.name == sweep)
                             .order_by(DecideRuleChange.version)).all()
            return [RuleChange(r.version, r.changed, r.seeds, r.runs, dict(r.before),
                               dict(r.after)) for r in rows]

    def pair_order(self, sweep: str) -> dict[tuple[str, int], int]:
        """(group_key, seed) -> the look that first read the pair, for the recorded pairs."""
        with Session(self.reader) as s:
            rows = s.execute(select(DecidePair.group_key, DecidePair.seed, DecidePair.look)
                             .join(Sweep, Sweep.id == DecidePair.sweep_id)
                             .where(Sweep.name == sweep)).all()
        return {(str(g), int(seed)): int(look) for g, seed, look in rows}

    def record_look(self, sweep: str, pairs: list[tuple[str, int]],
                    readings: list[dict[str, Any]], rule_version: int) -> int:
        """Append one look: the newly complete ``pairs`` (group_key, seed) and each row's
        ``readings`` (group_key, n, incomplete, mean, low, high, verdict); returns its number.
        Pairs already recorded keep their first look."""
        with Session(self.engine) as s, s.begin():
            sweep_id = self._sweep_id(s, sweep)
            if sweep_id is None:
                raise ValueError(f"record_look: no sweep named {sweep!r}")
            look = (s.scalar(select(func.max(DecideLook.look))
                             .where(DecideLook.sweep_id == sweep_id)) or 0) + 1
            known = set(s.execute(select(DecidePair.group_key, DecidePair.seed)
                                  .where(DecidePair.sweep_id == sweep_id)).all())
            s.add_all(DecidePair(sweep_id=sweep_id, group_key=g, seed=seed, look=look)
                      for g, seed in dict.fromkeys(pairs) if (g, seed) not in known)
            now = utcnow()
            s.add_all(DecideLook(sweep_id=sweep_id, look=look, rule_version=rule_version,
                                 recorded=now, **{k: _finite(r[k]) if k in _FLOATS else r[k]
                                                  for k in _LOOK_KEYS})
                      for r in readings)
        return look

    def decide_looks(self, sweep: str) -> pl.DataFrame:
        """Every recorded look of the sweep's rows: look, group_key, rule_version, n,
        incomplete, mean, low, high (null: unbounded), verdict, recorded; by look."""
        with Session(self.reader) as s:
            rows = s.execute(select(*(getattr(DecideLook, c) for c in _LOOK_COLUMNS))
                             .join(Sweep, Sweep.id == DecideLook.sweep_id)
                             .where(Sweep.name == sweep)
                             .order_by(DecideLook.look, DecideLook.group_key)).all()
        schema: dict[str, pl.DataType | type[pl.DataType]] = {
            "look": pl.Int64, "group_key": pl.String, "rule_version": pl.Int64,
            "n": pl.Int64, "incomplete": pl.Int64, "mean": pl.Float64, "low": pl.Float64,
            "high": pl.Float64, "verdict": pl.String, "recorded": pl.Datetime("us", "UTC")}
        return pl.DataFrame([tuple(r) for r in rows], schema=schema, orient="row")

    def settled(self, sweep: str, rule_version: int) -> dict[str, dict[str, Any]]:
        """group_key -> the first look (verdict, low, high, look) that decided the row under
        ``rule_version``: the row's verdict from then on."""
        looks = self.decide_looks(sweep)
        out: dict[str, dict[str, Any]] = {}
        for r in looks.iter_rows(named=True):
            if (r["rule_version"] == rule_version and r["verdict"] in DECIDED
                    and r["group_key"] not in out):
                out[r["group_key"]] = r
        return out


_LOOK_KEYS = ("group_key", "n", "incomplete", "mean", "low", "high", "verdict")
_FLOATS = ("mean", "low", "high")
_LOOK_COLUMNS = ("look", "group_key", "rule_version", "n", "incomplete", "mean", "low", "high",
                 "verdict", "recorded")


def _finite(x: Any) -> float | None:
    """An unbounded end (+-inf) or a missing mean is stored as NULL."""
    return None if x is None or not abs(float(x)) < float("inf") else float(x)

