"""A sweep's ``decide:`` rule and rows are fixed once it has runs: what a resubmit may change.

A verdict is only as good as the rule fixed before its data. A resubmit whose ``decide:``
block differs (orchestrator.sweep.decide.rule_differences: metric, margin, error rate, mixture
g, test, first/max seeds, a smaller budget, the block added or removed) or whose rows differ
(a variant or axis point added or dropped changes the family a correction counts) is refused in
one line naming the difference, before anything is written. ``--change-rule`` lets it through:
the change is recorded with its time and the seeds and runs the sweep had (db.record_rule_change)
and every decide sentence after it names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contract.errors import UserError
from contract.identity import group_keys
from orchestrator.sweep.decide import rule_differences
from orchestrator.sweep.spec import stored_decide

if TYPE_CHECKING:
    from orchestrator.sweep.plan import Plan
    from results_db import ResultsDB


def _row_differences(db: ResultsDB, plan: Plan) -> list[str]:
    """The rows (seed groups, named by variant) the file adds or drops vs the sweep's runs."""
    have = {str(g): str(v) for g, v in db.runs(sweep=plan.spec.name, with_config=False,
                                               columns=["group_key", "variant"])
            .select("group_key", "variant").unique().iter_rows()}
    want = {group_keys(r.spec.model_dump(mode="json"))[0]: r.variant for r in plan.runs}
    added = sorted({v for g, v in want.items() if g not in have})
    dropped = sorted({v for g, v in have.items() if g not in want})
    return ([f"rows added: {', '.join(added)}"] if added else []) + \
        ([f"rows dropped: {', '.join(dropped)}"] if dropped else [])


def check_rule(db: ResultsDB, plan: Plan, change_rule: bool) -> list[str]:
    """The differences that ``--change-rule`` lets through (record them with ``record``);
    raises UserError naming them when the sweep has runs and the flag is not given. Reads
    only: a refused submit changes nothing."""
    name = plan.spec.name
    spec_text = next((t for n, t in db.sweeps().select("name", "spec").iter_rows()
                      if n == name), None)
    if spec_text is None:
        return []
    stored = stored_decide(spec_text, name)
    diffs = rule_differences(stored, plan.spec.decide)
    if stored is not None or plan.spec.decide is not None:
        diffs += _row_differences(db, plan)
    if not diffs or db.runs(sweep=name, with_config=False, columns=["id"]).height == 0:
        return []
    if not change_rule:
        raise UserError(f"{plan.path}: sweep {name!r} already has runs under its decide: rule, "
                        f"and this file changes it ({'; '.join(diffs)}); a rule changed after "
                        "the data voids its error rate -- give the sweep another name, or "
                        "pass --change-rule to change it on the record")
    return diffs


def record(db: ResultsDB, plan: Plan, diffs: list[str]) -> None:
    """Record the change ``check_rule`` let through (no-op when nothing changed)."""
    if not diffs:
        return
    name = plan.spec.name
    spec_text = next(t for n, t in db.sweeps().select("name", "spec").iter_rows() if n == name)
    before = stored_decide(spec_text, name)
    after = plan.spec.decide
    db.record_rule_change(name, before.model_dump(mode="json") if before else {},
                          {**(after.model_dump(mode="json") if after else {}),
                           **({"rows": [d for d in diffs if d.startswith("rows ")]}
                              if any(d.startswith("rows ") for d in diffs) else {})})
