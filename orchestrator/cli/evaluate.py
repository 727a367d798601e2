"""`orchestrator evaluate RUN... [--tasks a,b] [--limit N] [--fewshot K]`.

Evaluates finished runs later: each run's spec comes from the DB (``runs.config``), its
weights from the newest complete checkpoint under its ``checkpoint_dir`` artifact, and
``trainer.final_eval.evaluate_checkpoint`` does the work. Checkpoints are read weights-only
(trainer/load.py refuses pickled code), except ZeRO-3 ones, which DeepSpeed's ``zero_to_fp32``
unpickles fully: evaluate only runs whose checkpoint directory you trust.

Where the numbers go (decision): the ``bench/...`` / ``longctx/...`` summaries are upserted
for the run and attributed to the run's **latest attempt**; no attempt is created and the run's
status never changes (an evaluation is not an execution: a new attempt would flip the run to
``running`` and its result would have to be re-derived). A re-evaluation of the same task
overwrites the summary (one value per (run, name), the results_db contract). Each evaluation
also adds an ``evaluation`` artifact (tasks, shots, limit, device, time, summary names), so
which numbers came from a later evaluation stays visible in the run's artifacts.

``--tasks`` replaces the spec's ``eval.benchmarks`` and skips its long-context evaluation;
without it the spec's own ``eval.benchmarks`` and ``eval.longctx`` run again (``--limit`` /
``--fewshot`` then override each benchmark's). Errors name the run or task: unknown run, a
run still running, no checkpoint, unknown task (checked before any model is loaded); a task
that fails during evaluation (e.g. a built-in task without its dataset offline) is reported
and makes the command exit 1, the other tasks' numbers are kept.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

import results_db
from contract.config import BenchmarkSpec
from contract.errors import UserError
from contract.metrics import LONGCTX
from contract.states import RunStatus
from orchestrator.cli.app import DbOpt, app, db_url, out, split_csv
from trainer.tasks import TASKS_DIR

if TYPE_CHECKING:
    from contract.config import RunSpec
    from results_db import ResultsDB, RunRow


class EvalReporter:
    """Reporter (contract/reporter.py contract) writing into an existing attempt of a run.

    Summaries are buffered and written once by ``flush`` (one transaction per run); artifacts
    go straight to the DB; ``eval_error`` artifacts are also kept in ``errors``.
    """

    def __init__(self, db: ResultsDB, run_id: int, attempt_id: int) -> None:
        self.db, self.run_id, self.attempt_id = db, run_id, attempt_id
        self.summaries: dict[str, float] = {}
        self.errors: list[dict[str, Any]] = []

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        pass  # evaluation writes no training curves

    def summary(self, metrics: Mapping[str, float]) -> None:
        self.summaries.update({k: float(v) for k, v in metrics.items()})

    def heartbeat(self) -> None:
        pass  # the run is not executing: nothing to keep alive

    def artifact(self, kind: str, payload: str | Path | Mapping[str, Any]) -> None:
        if isinstance(payload, (str, Path)):
            self.db.add_artifact(self.run_id, self.attempt_id, kind, path=str(payload))
            return
        if kind == "eval_error":
            self.errors.append(dict(payload))
        self.db.add_artifact(self.run_id, self.attempt_id, kind, data=dict(payload))

    def flush(self) -> None:
        self.db.log_summaries(self.run_id, self.attempt_id, self.summaries)


# ---------------------------------------------------------------------- inputs
def build_benchmarks(tasks: str | None, limit: int | None, fewshot: int | None,
                     include_path: Path | None, spec_benchmarks: tuple[Any, ...]
                     ) -> tuple[Any, ...] | None:
    """``--tasks a,b`` (+ shots/limit) -> BenchmarkSpecs; None keeps the spec's benchmarks
    (with ``--limit``/``--fewshot`` applied to them when given)."""

    names = split_csv(tasks)
    if tasks is not None and not names:
        raise UserError("--tasks: expected a comma-separated list of lm-eval task names")
    over: dict[str, Any] = {}
    if limit is not None:
        over["limit"] = limit
    if fewshot is not None:
        over["num_fewshot"] = fewshot
    if names is None:
        return tuple(b.model_copy(update=over) for b in spec_benchmarks) if over else None
    inc = str(include_path.resolve()) if include_path else None
    return tuple(BenchmarkSpec(task=n, include_path=inc, **over) for n in names)


def check_tasks(benchmarks: tuple[Any, ...]) -> None:
    """Unknown task names fail here, before a checkpoint is loaded. The shipped tiny tasks and
    ``include_path`` are indexed first (fast); lm-eval's built-in index (~15 s) only when a
    name is not among them."""
    from lm_eval.tasks import TaskManager


    dirs = sorted({str(TASKS_DIR), *(b.include_path for b in benchmarks if b.include_path)})
    wanted = {b.task for b in benchmarks}
    missing = wanted - set(TaskManager(include_path=dirs, include_defaults=False).all_tasks)
    if missing:
        missing -= set(TaskManager(include_path=dirs, include_defaults=True).all_tasks)
    if missing:
        raise UserError(f"--tasks: unknown lm-eval task(s) {', '.join(sorted(missing))} (not "
                        f"among the shipped tasks in {TASKS_DIR}, --include-path, nor lm-eval's "
                        "built-in tasks)")


def checkpoint_dir_of(db: ResultsDB, row: RunRow, spec: RunSpec) -> Path:
    """The run's recorded checkpoint dir (orchestrator.run.driver.rerun owns the rule, and refuses a
    recorded path that is not <storage>/<sweep>/<name>/checkpoints of this run)."""
    from orchestrator.run.driver.rerun import recorded_checkpoint_dir, sweep_of

    # the row's own identity: a stored config naming another run must not load its weights
    found = recorded_checkpoint_dir(db, row.id, sweep_of(db, row), row.name)
    if found is None:
        raise UserError(f"run {row.name} (id {row.id}, {row.status}) has no checkpoint: no "
                        "checkpoint_dir artifact (it never started training)")
    return found


def _check_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"--device {device}: CUDA is not available on this machine "
                        "(use --device cpu)")


# ---------------------------------------------------------------------- one run
def evaluate_run(db: ResultsDB, row: RunRow, tasks: tuple[Any, ...] | None, device: str, *,
                 longctx: bool = True) -> EvalReporter:
    """Evaluate one run into its latest attempt; returns the reporter (summaries, errors).

    ``tasks``: the benchmarks to run (None: the spec's); ``longctx``: also the spec's
    long-context evaluation (off for ``--tasks``)."""
    from orchestrator.run.driver.rerun import stored_spec, sweep_of
    from trainer.final_eval import evaluate_checkpoint
    from trainer.load import find_checkpoint

    if row.status in (RunStatus.RUNNING, RunStatus.PENDING):
        raise UserError(f"run {row.name} is {row.status}; evaluate it once it has finished")
    attempts = db.attempts(row.id)
    if not attempts:
        raise UserError(f"run {row.name} has no attempt (it never ran)")
    spec = stored_spec(row, sweep_of(db, row))  # a config naming another run is refused
    ckpt = checkpoint_dir_of(db, row, spec)
    try:
        find_checkpoint(ckpt)
    except FileNotFoundError as exc:
        raise UserError(f"run {row.name}: no complete checkpoint under {ckpt}") from exc
    if not longctx:  # --tasks: those benchmarks only, no long-context pass
        spec = spec.model_copy(update={"eval": spec.eval.model_copy(update={"longctx": None})})
    if not (tasks or spec.eval.benchmarks) and spec.eval.longctx is None:
        raise UserError(f"run {row.name}: its spec has no eval.benchmarks or eval.longctx; "
                        "name tasks with --tasks")
    rep = EvalReporter(db, row.id, attempts[-1].id)
    started = time.time()
    evaluate_checkpoint(spec, str(ckpt), rep, benchmarks=tasks, device=device)
    rep.flush()
    rep.artifact("evaluation", {
        "tasks": [b.model_dump() for b in (tasks or spec.eval.benchmarks)],
        "longctx": spec.eval.longctx is not None, "device": device, "checkpoint_dir": str(ckpt),
        "wall_s": round(time.time() - started, 3), "summaries": sorted(rep.summaries)})
    return rep


def evaluate_runs(url: str, refs: list[str], *, tasks: str | None = None,
                  limit: int | None = None, fewshot: int | None = None,
                  include_path: Path | None = None, device: str = "cpu"
                  ) -> dict[str, EvalReporter]:
    """All runs are resolved and checked (names, tasks) before the first evaluation."""
    from orchestrator.run.driver.rerun import resolve_runs, stored_spec

    if include_path is not None and not include_path.is_dir():
        raise UserError(f"--include-path: {include_path} is not a directory")
    _check_device(device)
    db = results_db.open(url)
    rows = resolve_runs(db, list(refs))
    plans = []
    for row in rows:
        spec_b = stored_spec(row).eval.benchmarks
        plans.append((row, build_benchmarks(tasks, limit, fewshot, include_path, spec_b)))
    to_check = tuple(b for _, bs in plans for b in (bs or ()))
    if to_check:
        check_tasks(to_check)
    return {row.name: evaluate_run(db, row, bs, device, longctx=tasks is None)
            for row, bs in plans}


# ---------------------------------------------------------------------- CLI
@app.command()
def evaluate(runs: Annotated[list[str], typer.Argument(help="Run ids or names")],
             tasks: Annotated[str | None, typer.Option(
                 help="Comma-separated lm-eval tasks (default: the spec's eval.benchmarks "
                      "and eval.longctx)")] = None,
             limit: Annotated[int | None, typer.Option(min=1, help="Examples per task")] = None,
             fewshot: Annotated[int | None, typer.Option(min=0, help="Shots")] = None,
             include_path: Annotated[Path | None, typer.Option(
                 help="Directory of local lm-eval task YAMLs")] = None,
             device: Annotated[str, typer.Option(help="cpu, cuda, cuda:1 ...")] = "cpu",
             db: DbOpt = None) -> None:
    """Benchmark finished runs from their checkpoints; bench/* summaries go to the run's
    latest attempt (the run's status does not change)."""
    done = evaluate_runs(db_url(db), runs, tasks=tasks, limit=limit, fewshot=fewshot,
                         include_path=include_path, device=device)
    failed = 0
    for name, rep in done.items():
        main = {k: v for k, v in sorted(rep.summaries.items()) if k.count("/") == 1
                or k.startswith(LONGCTX) and k.endswith("/ppl")}
        shown = ", ".join(f"{k} {v:.4g}" for k, v in main.items()) or "no numbers"
        out.print(f"{name}: {shown}")
        for e in rep.errors:
            failed += 1
            out.print(f"{name}: {e.get('eval')} {e.get('name')} failed: {e.get('error')}")
    raise typer.Exit(1 if failed else 0)
