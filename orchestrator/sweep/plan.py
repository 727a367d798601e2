"""A sweep file -> a validated, expanded ``Plan`` (what ``validate``, ``submit`` and
``submit --detach`` start from), plus the checks that need no training: data files.

Light on purpose: no Ray, no torch, no results_db import here (``validate`` and every error
path must answer fast); ``trainer.data``, torch-free on import, checks the data a run reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contract.errors import SpecError, SpecIssue
from contract.yamlsrc import Source
from orchestrator.sweep.expand import ExpandedRun, expand
from orchestrator.sweep.spec import SweepSpec, load_spec
from trainer.data import check

if TYPE_CHECKING:
    import polars as pl


@dataclass
class Plan:
    path: Path
    spec: SweepSpec
    src: Source
    runs: list[ExpandedRun]


def not_in_file_note(plan: Plan, sweep_runs: pl.DataFrame | None) -> str | None:
    """A note when the DB's sweep of this name holds runs this file does not list (an earlier
    version of the file, another file with the same ``name``): their results stay in the
    sweep's leaderboard and tables, which a user who edited the file would not expect.
    ``sweep_runs``: the sweep's runs (a frame with ``fingerprint`` and ``variant``)."""
    if sweep_runs is None or sweep_runs.height == 0:
        return None
    listed = {r.fingerprint for r in plan.runs}
    other = sweep_runs.filter(~sweep_runs["fingerprint"].is_in(list(listed)))
    if other.height == 0:
        return None
    variants = list(dict.fromkeys(other["variant"].to_list()))
    shown = ", ".join(str(v) for v in variants[:5]) + (", ..." if len(variants) > 5 else "")
    return (f"note: sweep '{plan.spec.name}' also holds {other.height} run(s) that "
            f"{plan.path} does not list (variants: {shown}), from an earlier version of the "
            f"file or another file with this name; their results stay in the sweep's "
            f"leaderboard and tables (give the file another name to keep them apart; "
            f"`orchestrator runs --sweep {plan.spec.name}` lists them)")


def make_plan(path: str | Path) -> Plan:
    """Parse + expand, or raise SpecError (FILE:LINE KEY) before touching anything."""
    spec, src = load_spec(path)
    return Plan(Path(path), spec, src, expand(spec, src))


def check_data(plan: Plan) -> None:
    """Raise SpecError when a run's data (paths, decoding, tokenizer) cannot be used.

    Each distinct (data, train) pair is checked once by ``trainer.data.check``; a problem is
    reported once with the number of runs it affects. Synthetic data has nothing to check
    (and costs no import).
    """
    groups: dict[tuple[str, str], list[ExpandedRun]] = {}
    for r in plan.runs:
        for where, data in _data_configs(r):
            if data.source == "synthetic":  # no files: nothing to check, no import
                continue
            key = (where, data.model_dump_json() + r.spec.train.model_dump_json()
                   + str(r.spec.model.vocab_size))
            groups.setdefault(key, []).append(r)
    if not groups:
        return

    issues = []
    for (where, _), runs in groups.items():
        data = dict(_data_configs(runs[0]))[where]
        for problem in check(data, runs[0].spec.train,
                             vocab_size=runs[0].spec.model.vocab_size, key=where):
            n = len(runs)
            tail = f"run {runs[0].name}" if n == 1 else f"in {n} runs, e.g. {runs[0].name}"
            issues.append(_issue(plan.src, where, f"{problem} ({tail})"))
    if issues:
        raise SpecError([*issues, SpecIssue(str(plan.path), None, (), (
            "data is checked on this machine; --no-data skips the check (paths that exist "
            "only on a cluster)"))])


def _data_configs(run: ExpandedRun) -> list[tuple[str, Any]]:
    """(dotted RunSpec key, DataConfig) of the training data and every eval.ppl_sets entry."""
    out = [("data", run.spec.data)]
    out += [(f"eval.ppl_sets.{name}", d) for name, d in run.spec.eval.ppl_sets.items()]
    return out


def _issue(src: Source, where: str, message: str) -> SpecIssue:
    """Point at the base key that sets the data, else the file (a variant may set it)."""
    path: tuple[str | int, ...] = ("base", *where.split("."))
    return src.issue(path if src.line_of(path) is not None else (), message)
