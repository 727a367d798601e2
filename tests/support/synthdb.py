"""The one builder core of synthetic results DBs: runs registered by the real submit path.

A scenario hands ``register`` a sweep spec (a dict, rendered to YAML, or YAML text); it goes
through ``orchestrator.sweep.plan.make_plan`` and ``orchestrator.run.driver.submit.register`` as
``orchestrator submit`` would, so every run's config is a validated RunSpec, and its
fingerprint, group keys and parameter counts are the real ones. ``play`` then writes one
attempt of a run through the writer API up to the end state the scenario asks for. The
scenario modules (synth.py,
dashboard_sample.py, tests/dashboard_edge_dbs.py, tests/sample_db.py) only hold data.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from orchestrator.run.driver.submit import register as submit_register
from orchestrator.sweep.plan import make_plan

if TYPE_CHECKING:
    from orchestrator.sweep.expand import ExpandedRun
    from results_db import ResultsDB, RunRow

ENDS = ("pending", "running", "failed", "succeeded", "diverged")
FAILURE = "RuntimeError: synthetic failure"
# a sweep file's variant names (orchestrator.sweep.spec); any other name goes in via ``labels``
VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.]*")


@dataclass(frozen=True)
class Registered:
    """One run of the plan with the row the DB gave it."""

    run: ExpandedRun
    row: RunRow

    @property
    def id(self) -> int:
        return self.row.id


def sweep_yaml(spec: Mapping[str, Any]) -> str:
    # safe_dump writes floats as 3.0e-05, which YAML 1.1 reads back as a float (JSON's 3e-05
    # would come back as a string)
    return yaml.safe_dump(dict(spec), sort_keys=False, allow_unicode=True, width=100)


def register(db: ResultsDB, spec: Mapping[str, Any] | str, workdir: Path | None = None,
             labels: Mapping[str, str] | None = None) -> list[Registered]:
    """Register the sweep ``spec`` as ``orchestrator submit`` does (force=False); returns its
    runs in plan order. The YAML goes to a file because make_plan reads (and the sweep row
    stores) the file's text.

    ``labels``: {variant in the file: variant to register}, for names the writer API takes
    (free text: markdown, spaces, unicode) but a sweep file's variant names do not; the run
    name's variant part follows. Config and fingerprint are the planned ones either way."""
    text = spec if isinstance(spec, str) else sweep_yaml(spec)
    with tempfile.TemporaryDirectory(prefix="synthdb-", dir=workdir) as tmp:
        path = Path(tmp) / "sweep.yaml"
        path.write_text(text, encoding="utf-8")
        plan = make_plan(path)
        if labels:
            plan.runs = [dataclasses.replace(r, variant=labels[r.variant],
                                             name=labels[r.variant] + r.name[len(r.variant):])
                         if r.variant in labels else r for r in plan.runs]
        res = submit_register(db, plan, force=False)
    rows = {r.fingerprint: r for r in (*res.to_run, *res.cached, *res.running)}
    return [Registered(r, rows[r.fingerprint]) for r in plan.runs]


def one_run(db: ResultsDB, sweep: str = "s") -> int:
    """A sweep of one run (the ``tiny`` baseline, seed 0), registered as above; its id. For
    tests of one run's attempts, claims and locks."""
    (reg,) = register(db, {"name": sweep, "base": {"model": {"preset": "tiny"}},
                           "variants": {"baseline": {}}, "seeds": [0]})
    return reg.id


def play(db: ResultsDB, run_id: int, end: str = "succeeded", *, host: str = "synth",
         points: Iterable[tuple[int, str, float]] = (),
         summaries: Mapping[str, float] | None = None,
         artifacts: Iterable[tuple[str, dict[str, Any]]] = (),
         provenance: Mapping[str, Any] | None = None,
         error: str = FAILURE, traceback: str | None = None) -> int | None:
    """One attempt of run ``run_id`` up to ``end``; returns the attempt id (None: pending).

    Points, then summaries, are logged before the end (a running run shows its curve, a
    failed one the curve up to the failure); the scenario decides which runs have summaries
    (the trainer writes them after its final evaluation, so a run may fail after them).
    ``artifacts``: (kind, kwargs of add_artifact), logged right after the start;
    ``provenance``: the attempt's provenance document, recorded at its start as the DB
    reporter does (db.record_provenance)."""
    if end not in ENDS:
        raise ValueError(f"play: end {end!r} is not one of {ENDS}")
    if end == "pending":
        return None
    att = db.start_attempt(run_id, host=host)
    if provenance is not None:
        db.record_provenance(run_id, att.id, provenance)
    for kind, kw in artifacts:
        db.add_artifact(run_id, att.id, kind, **kw)
    pts = list(points)
    if pts:
        db.log_metrics(run_id, att.id, pts)
    if summaries:
        db.log_summaries(run_id, att.id, dict(summaries))
    if end == "failed":
        db.finish_attempt(att.id, "failed", error=error,
                          traceback=traceback or f"Traceback (most recent call last):\n{error}")
    elif end != "running":
        db.finish_attempt(att.id, end)
    return att.id
