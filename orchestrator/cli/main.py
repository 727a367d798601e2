"""`orchestrator` command line (the CLI surface: README.md, docs/architecture.md).

Exit code 0 only on success. User errors (bad YAML, unknown run, refused SQL, Ray not
reachable) print one clear sentence on stderr, no traceback; exit 2 for invalid input, 1 for
runs that did not succeed, 130 when interrupted.
"""

from __future__ import annotations

import ctypes
import importlib.util
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

import results_db
from contract.child import child_env, python_command
from contract.errors import Interrupted, UserError
from contract.states import CANCELLABLE, DONE_OK, RunStatus, parse_status
from contract.textout import clip

# The command modules register on `app` when imported; app.py holds what they share.
from orchestrator.cli import evaluate, findings, memlimit, read, report, results  # noqa: F401
from orchestrator.cli.app import (
    DbOpt,
    RerunStorageOpt,
    StaleOpt,
    StorageOpt,
    app,
    check_env,
    db_app,
    db_url,
    err,
    open_read,
    open_sweep,
    out,
    split_csv,
    stale_after,
)
from orchestrator.cli.detach import follow_hint, submit_detached
from orchestrator.sweep.plan import check_data, make_plan, not_in_file_note
from orchestrator.sweep.table import print_runs

if TYPE_CHECKING:
    import polars as pl

    from orchestrator.sweep.plan import Plan


@app.command()
def validate(file: Path, db: DbOpt = None, params: Annotated[bool, typer.Option(
        help="Count parameters (analytic, per distinct model)")] = True,
             data: Annotated[bool, typer.Option(help="Check data files and tokenizers")] = True
             ) -> None:
    """Validate a sweep file (and its data files) and print its expanded run table (with each
    run's DB state when the DB exists; nothing is ever written)."""

    plan = make_plan(file)
    if data:
        check_data(plan)
    status, sweep_runs = _known_status(db, plan)
    print_runs(out, f"{plan.spec.name}: {len(plan.runs)} runs", plan.runs, with_params=params,
               status={r.name: status.get(r.fingerprint, "new") for r in plan.runs}
               if status else None)
    decide = plan.spec.decide
    if decide is None:
        out.print(f"{file}: valid, {len(plan.runs)} runs")
    else:  # the table lists every seed a row may get; the sweep starts with first_seeds
        rows = len(plan.runs) // decide.max_seeds
        out.print(f"{file}: valid, up to {len(plan.runs)} runs: decide: starts with "
                  f"{rows * decide.first_seeds} ({decide.first_seeds} seeds x {rows} seed "
                  "groups), then adds seeds to undecided rows"
                  + (f", at most {decide.budget.runs} runs" if decide.budget.runs else ""))
    if note := not_in_file_note(plan, sweep_runs):
        out.print(note)


@app.command()
def submit(file: Path, db: DbOpt = None,
           dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan only")] = False,
           force: Annotated[bool, typer.Option(help="Redo runs that already succeeded")] = False,
           address: Annotated[str | None, typer.Option(help="Ray cluster address")] = None,
           detach: Annotated[bool, typer.Option(help="Submit as a Ray Job")] = False,
           max_concurrent: Annotated[int | None, typer.Option(min=1)] = None,
           storage: StorageOpt = Path("runs"), stale: StaleOpt = None,
           params: Annotated[bool, typer.Option(help="Count parameters in --dry-run")] = True,
           data: Annotated[bool, typer.Option(help="Check data files and tokenizers (with "
                                                   "--detach the cluster's driver does)")
                           ] = True,
           change_rule: Annotated[bool, typer.Option(
               "--change-rule", help="Let a sweep that has runs change its decide: rule or "
                                     "rows (recorded; every verdict after says so)")] = False,
           ) -> None:
    """Expand a sweep, skip what already succeeded, run the rest on Ray Tune."""
    plan = make_plan(file)  # invalid files stop here: nothing written, nothing scheduled
    if data and not (detach and not dry_run):  # a detached sweep's data is on the cluster
        check_data(plan)
    if detach and not dry_run:
        job = submit_detached(file, db_url(db), address, storage, max_concurrent, force)
        out.print(follow_hint(job, db_url(db)))
        return
    if dry_run:
        _dry_run(db, plan, params)
        return
    from orchestrator.run.driver.adaptive import run_adaptive
    from orchestrator.run.driver.submit import run_submit

    if plan.spec.decide is not None:  # seeds allocated until rows decide
        if force:
            raise UserError("submit --force: an adaptive (decide:) sweep keeps its seeds; "
                            "rerun the runs to redo with `orchestrator rerun --sweep "
                            f"{plan.spec.name}`")
        code = run_adaptive(db_url(db), plan, storage=storage, address=address,
                            max_concurrent=max_concurrent, stale_after=stale_after(stale),
                            console=out, change_rule=change_rule)
    else:
        code = run_submit(db_url(db), plan, force=force, storage=storage, address=address,
                          max_concurrent=max_concurrent, stale_after=stale_after(stale),
                          console=out, change_rule=change_rule)
    raise typer.Exit(code)


def _dry_run(db: str | None, plan: Plan, params: bool) -> None:
    status, sweep_runs = _known_status(db, plan)
    by_name = {r.name: status.get(r.fingerprint, "new") for r in plan.runs}
    print_runs(out, f"{plan.spec.name} (dry run)", plan.runs, status=by_name,
               with_params=params)
    cached = sum(s in DONE_OK for s in by_name.values())
    again = _other_code(db, plan) if cached else 0
    out.print(f"dry run: {len(by_name)} runs, {cached - again} cached, "
              f"{len(by_name) - cached + again} to run"
              + (f" ({again} result(s) of other code: cached_by config_and_code)" if again
                 else "") + "; nothing was written or scheduled")
    if note := not_in_file_note(plan, sweep_runs):
        out.print(note)


def _other_code(db: str | None, plan: Plan) -> int:
    """How many of the plan's results `submit` would train again under ``cached_by:
    config_and_code`` (0 under the default): other code version than this process's."""
    if plan.spec.cached_by != "config_and_code":
        return 0
    from orchestrator.run.driver.code_cache import RESULT_STATES, current_code

    fps = {r.fingerprint for r in plan.runs}
    d = open_read(db)
    ids = set(d.runs_by_code(plan.spec.name, current_code(), states=RESULT_STATES))
    mine = d.runs(plan.spec.name, with_config=False, columns=["id", "fingerprint"])
    return sum(1 for i, fp in mine.select("id", "fingerprint").rows() if i in ids and fp in fps)


def _known_status(db: str | None, plan: Plan
                  ) -> tuple[dict[str, str], pl.DataFrame | None]:
    """(fingerprint -> status of the plan's runs, the plan's sweep's runs) from an existing DB,
    opened read-only (no DB: nothing known)."""

    try:
        frame = open_read(db).runs(with_config=False,
                                   columns=["fingerprint", "status", "variant"])
    except (results_db.DBUnreadable, results_db.DBOutdated) as exc:
        # the sweep file is still valid: say why the DB states are missing
        err.print(f"note: {_one_line(exc)}; DB states are not shown")
        return {}, None
    except results_db.DBNotFound:  # no DB yet: normal before the first submit
        return {}, None
    if frame.height == 0:
        return {}, None
    known = dict(zip(frame["fingerprint"].to_list(), frame["status"].to_list()))
    return ({r.fingerprint: known[r.fingerprint] for r in plan.runs if r.fingerprint in known},
            frame.filter(frame["sweep"] == plan.spec.name))


@app.command()
def rerun(runs: Annotated[list[str] | None, typer.Argument(help="Run ids or names")] = None,
          db: DbOpt = None, sweep: Annotated[str | None, typer.Option()] = None,
          status: Annotated[str | None, typer.Option(help="e.g. failed,lost")] = None,
          fresh: Annotated[bool, typer.Option(help="Ignore checkpoints")] = False,
          address: Annotated[str | None, typer.Option()] = None,
          detach: Annotated[bool, typer.Option(help="Run in the background")] = False,
          storage: RerunStorageOpt = None,
          code_other: Annotated[bool, typer.Option(
              "--code-other-than-current",
              help="With --sweep: the runs (default: succeeded, diverged) whose newest attempt "
                   "another code version trained (or none recorded); implies --fresh")
          ] = False) -> None:
    """New attempt of runs (resumes from the last checkpoint unless --fresh)."""
    from orchestrator.run.driver.rerun import rerun_runs
    from orchestrator.run.driver.submit import summarise

    url = db_url(db)
    refs: list[str | int] = list(runs or [])
    if not refs and sweep is None:
        raise UserError("rerun: give run ids/names, or --sweep S [--status failed,lost]")
    if code_other and (refs or sweep is None):
        raise UserError("rerun --code-other-than-current: give --sweep S and no run ids")
    # a mistyped --db or sweep is an error, not a new empty DB (the writer open creates one)
    check_runs_readonly(db, refs, sweep)  # with ids and --sweep: each id must be in it
    if status is not None:  # a typo must not widen what is taken (pending runs are)
        try:
            [parse_status(s) for s in split_csv(status) or []]
        except ValueError as exc:
            raise UserError(str(exc).replace("status:", "--status:", 1)) from None
    if not refs and sweep is not None:  # (one of the two is given: checked above)
        from orchestrator.run.driver.code_cache import code_rerun_plan
        from orchestrator.run.driver.rerun import sweep_rerun_plan

        pick = code_rerun_plan if code_other else sweep_rerun_plan
        plan = pick(results_db.open(url), sweep, split_csv(status))
        fresh = fresh or code_other  # the other code's checkpoints must not be resumed
        for rid, why in plan.left:
            out.print(f"rerun: left run {rid} alone: {why}", highlight=False)
        refs = list(plan.take)
        if not refs:
            why = ("no result of another code version" if code_other else
                   f"status {status or 'failed,lost'}, or pending with no live driver")
            out.print(f"rerun: nothing to rerun in sweep {sweep} ({why})")
            return
    final = rerun_runs(url, refs, fresh=fresh, address=address, detach=detach,
                       storage=storage, console=None if detach else out)
    if detach:
        out.print(f"rerun: {len(final)} run(s) queued in the background")
        return
    raise typer.Exit(summarise(results_db.open(url), final, out))


@app.command()
def cancel(runs: Annotated[list[str] | None, typer.Argument()] = None, db: DbOpt = None,
           sweep: Annotated[str | None, typer.Option()] = None) -> None:
    """Cancel pending/running runs (running trials stop at their next heartbeat)."""
    from orchestrator.run.driver.rerun import resolve_runs

    if not runs and not sweep:
        raise UserError("cancel: give run ids/names or --sweep S")
    # read-only first: a mistyped --db, sweep or run is one line and nothing is created
    d = open_sweep(db, sweep)
    if runs:
        ids = [r.id for r in resolve_runs(d, list(runs), sweep)]  # all in --sweep when given
    else:
        frame = d.runs(sweep=sweep, status=CANCELLABLE)
        ids = [int(i) for i in frame["id"].to_list()] if frame.height else []
    changed = results_db.open(db_url(db)).set_status(ids, RunStatus.CANCELLED)
    out.print(f"cancelled {len(changed)} run(s)" + (f" ({len(ids) - len(changed)} were "
                                                    "already finished)" if len(changed) <
                                                    len(ids) else ""))


def check_runs_readonly(db: str | None, refs: list[str | int], sweep: str | None) -> None:
    """That ``refs`` (and ``sweep``) exist, on a read-only handle: an unknown run, sweep or DB
    file is one line (exit 2) and nothing is created before the writer opens."""
    from orchestrator.run.driver.rerun import resolve_runs

    resolve_runs(open_sweep(db, sweep), refs, sweep)


@app.command()
def dashboard(db: DbOpt = None, port: Annotated[int, typer.Option(min=1, max=65535)] = 8501,
              host: Annotated[str, typer.Option(help="Listen address (the dashboard can "
                                                     "start runs: keep it local)")] = "127.0.0.1"
              ) -> None:
    """Serve the Streamlit dashboard on HOST:PORT (127.0.0.1 by default)."""
    spec = importlib.util.find_spec("dashboard")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the dashboard package is not installed (pip install -e .)")
    app_py = Path(list(spec.submodule_search_locations)[0]) / "app.py"
    if not app_py.exists():
        raise UserError(f"dashboard entry point {app_py} does not exist")
    env = child_env({"GATESWEEP_DB": db_url(db)})
    cmd = python_command("streamlit", "run", str(app_py), "--server.port", str(port),
                         "--server.address", host, "--server.headless", "true",
                         "--browser.gatherUsageStats", "false")
    out.print(f"dashboard: http://{host}:{port} (DB {env['GATESWEEP_DB']})")
    raise typer.Exit(_serve_owned(cmd, env))


def _serve_owned(cmd: list[str], env: dict[str, str]) -> int:
    """Run the streamlit server as this process's child and never leave it behind: SIGTERM
    (or SIGHUP) to us stops it too, Ctrl-C stops it when it reached only us, and on Linux it
    gets SIGTERM if we die (even by SIGKILL). Returns its exit code (0 after a stop we asked
    for); a plain subprocess.call left it serving the port after every SIGTERM."""

    proc = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent)
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        proc.terminate()

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        stopping = True
        rc = 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for s, handler in old.items():
            signal.signal(s, handler)
    return 0 if stopping else rc


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux for SIGTERM when the parent dies
    (prctl PR_SET_PDEATHSIG); elsewhere nothing (the signal handlers above still apply)."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


@db_app.command("upgrade")
def db_upgrade(db: DbOpt = None) -> None:
    """Create or migrate the results DB schema to the newest revision."""
    rev = results_db.upgrade(db_url(db))
    out.print(f"database at revision {rev}")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point: user errors become one line on stderr."""
    try:  # typer >= 0.20 vendors click; its exceptions are not click's
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - older typer
        from click import ClickException  # type: ignore[assignment]

    try:
        check_env()  # GATESWEEP_* settings, before anything is printed or changed
        if not {"--help", "-h"} & set(argv if argv is not None else sys.argv[1:]):
            memlimit.check()  # a ulimit -v too small for polars: one line, not a Rust abort
        # standalone_mode=False: click *returns* a typer.Exit's code instead of raising it
        rv = app(args=argv, standalone_mode=False)
    # every error echoes what the user typed: clipped (contract.textout.clip), so a 100 KB
    # argument or key is its head and tail, not 100 KB of one line
    except UserError as exc:  # SpecError included: every issue of a sweep file, located
        err.print(f"error: {clip(str(exc))}")
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except ClickException as exc:
        exc.message = clip(exc.message)
        exc.show()
        return exc.exit_code
    except typer.Abort:
        err.print("error: aborted")
        return 130
    except (ValueError, KeyError, OSError) as exc:
        # OSError: a path or DB the environment refuses (results_db.DBUnavailable: a DB that
        # cannot be opened or written, named in the message; a directory where a file goes)
        err.print(f"error: {clip(_one_line(exc))}")
        return 2
    except Interrupted as exc:
        err.print(f"error: {exc}")
        return 130
    except (ImportError, MemoryError) as exc:  # a library that could not be mapped
        said = memlimit.said(f"{type(exc).__name__}: {exc}", "the command", memlimit.FLOOR_MIB)
        if said is None:
            raise
        err.print(f"error: {said}")
        return 2
    return rv if isinstance(rv, int) else 0


def _one_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return text or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
