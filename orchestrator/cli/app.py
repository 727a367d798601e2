"""The `orchestrator` Typer app and what every command module shares (options, consoles, DB).

Command modules (main.py, read.py, results.py, evaluate.py) import this module and
register on ``app``; cli.py imports them all and holds ``main``. Nothing here imports
results_db, torch, Ray or polars at module level: ``orchestrator --help`` and every error path
must answer in well under half a second.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

import results_db
from contract import env
from contract.errors import UserError
from contract.textout import terminal
from orchestrator.run.driver.paths import storage_arg
from orchestrator.run.env import absolute_db_url

if TYPE_CHECKING:
    from results_db import ResultsDB

STALE_ENV = "GATESWEEP_STALE_AFTER"

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, no_args_is_help=True,
                  help="Declarative attention-gate ablation sweeps: YAML -> Ray Tune -> "
                       "DeepSpeed -> SQL -> Streamlit.")
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True)
app.add_typer(db_app, name="db")



class TextConsole(Console):
    """A rich Console that prints every string as text: no markup (a sweep named ``[/x]`` is
    a name, not a closing tag that raises MarkupError), no emoji codes, and control
    characters shown as ``\\xNN`` (an ESC sequence stored in the DB never reaches the
    terminal). Styles go through ``rich.text.Text`` / ``style=``, never through markup."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **kw)

    def render_str(self, text: str, **kw: Any) -> Any:  # every str a Table or print() shows

        return super().render_str(terminal(text), **{**kw, "markup": False, "emoji": False})


# Wide when piped (logs, tests): run names must not be truncated.
out = TextConsole(width=None if sys.stdout.isatty() else 160)
err = TextConsole(stderr=True, soft_wrap=True)

DbOpt = Annotated[str | None, typer.Option("--db", help="Results DB URL or SQLite file path "
                                           "[default: $GATESWEEP_DB or sqlite:///results.db]")]
StaleOpt = Annotated[float | None, typer.Option(
    "--stale-after", min=0.0, max=env.MAX_SECONDS,
    help="Seconds without a heartbeat before a running run counts as lost "
         "[default: $GATESWEEP_STALE_AFTER, else each attempt's own 3 heartbeat "
         "intervals + 2 s: 17 s at the default 5 s]")]


def _storage(raw: str | Path) -> Path:
    try:  # the rule is orchestrator/run/driver/paths.py's; click reports it as a bad --storage
        return storage_arg(raw)
    except UserError as exc:
        raise typer.BadParameter(str(exc)) from None


ReplaceSymlinkOpt = Annotated[bool, typer.Option(
    "--replace-symlink", help="When an --out file is a symbolic link, replace the link with "
                              "the file (what it points to is not written); when an output "
                              "folder is one, write into its target. Default: refuse")]
StorageOpt = Annotated[Path, typer.Option("--storage", parser=_storage,
                                          help="Checkpoints and Tune state")]
RerunStorageOpt = Annotated[Path | None, typer.Option(
    "--storage", parser=_storage, help="Checkpoints (default: where the run's attempts "
                                       "checkpointed, else beside its sweep's runs, else ./runs)")]


def db_url(db: str | None) -> str:
    return absolute_db_url(db or results_db.default_url())


def open_read(db: str | None) -> ResultsDB:
    """The results DB of a read-only command: never created, migrated or changed (mode=ro);
    a missing DB raises results_db.DBNotFound (a FileNotFoundError: exit 2)."""

    d = results_db.open(db_url(db), readonly=True)
    # a newer gatesweep's DB: read, with a warning (results_db/schema/ownership.py)
    if d.schema_note:
        err.print(f"warning: {d.schema_note}")
    return d


def open_sweep(db: str | None, sweep: str | None) -> ResultsDB:
    """open_read, refusing a --sweep/SWEEP the DB does not know (exit 2, one line) instead of
    printing an empty answer for a typo."""

    d = open_read(db)
    if sweep is not None and d.sweep_status(sweep).height == 0:
        known = d.sweeps()["name"].to_list()
        raise UserError(f"no sweep named {sweep!r} in {d.url}; known sweeps: "
                        f"{', '.join(known[:20]) or 'none'}{' ...' if len(known) > 20 else ''}")
    return d


def check_metrics(d: ResultsDB, sweep: str, metrics: list[str], option: str = "--metric") -> None:
    """A metric the sweep never recorded is a typo, not a table of 'no data' rows (exit 2)."""
    known = d.summary_names(sweep)
    if not known:  # nothing finished yet: no typo to catch, the table says "no data"
        return
    for m in metrics:
        if m not in known:
            raise UserError(f"{option}: {m!r} is not a summary metric of sweep {sweep!r}; "
                            f"known: {', '.join(known[:30])}"
                            f"{' ...' if len(known) > 30 else ''}")


def stale_after(value: float | None) -> float | None:
    """--stale-after, else $GATESWEEP_STALE_AFTER, else None: each attempt's own threshold,
    derived from its heartbeat interval (contract.states.stale_after_s)."""
    if value is not None:  # the option's bounds refuse NaN, inf and negatives
        return value
    return env.seconds_or_none(STALE_ENV)


def check_env() -> None:
    """Every GATESWEEP_* setting (contract/env.py's table) read once, before a command prints or
    changes anything: a bad value is one line naming the variable (exit 2), not a retry loop
    that spins (DB_WAIT_S=nan), every run flagged stale (STALE_AFTER=-5) or a refusal after
    the table printed, after `rerun` had re-queued its runs, or inside a trial."""
    env.check_all()
    results_db.default_url()  # GATESWEEP_DB's meaning: a URL results_db can open


def split_csv(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [v.strip() for v in value.split(",") if v.strip()]
