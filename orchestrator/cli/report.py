"""`orchestrator report SWEEP`: the sweep as one shareable file.

The report is built by the dashboard package (dashboard/report/: it draws the dashboard's own
charts), which sits a floor above the orchestrator; so, as `orchestrator dashboard` starts
Streamlit, this command runs ``python -P -m dashboard.report`` in a child process
(contract/child.py: never code from the working directory), into a private temporary folder,
and then puts the files in place through the CLI's one output writer
(orchestrator/cli/outfiles.py: all files or none, never a half-written report).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from contract.child import child_env, python_command
from contract.errors import UserError
from orchestrator.cli import memlimit
from orchestrator.cli.app import DbOpt, ReplaceSymlinkOpt, app, db_url, open_sweep, out
from orchestrator.cli.outfiles import Writer, check_target, out_dir, write_files
from results_db.engine import DB_ENV

FORMATS = {"html": ".html", "markdown": ".md"}


def _copy(src: Path) -> Writer:
    def write(dest: BinaryIO) -> None:  # the writer's open temporary file (outfiles.py)
        with src.open("rb") as fh:
            shutil.copyfileobj(fh, dest)
    return write


@app.command()
def report(sweep: str, db: DbOpt = None,
           out_file: Annotated[Path | None, typer.Option(
               "--out", help="The report file [default: SWEEP-report.html / .md]; Markdown "
                             "figures go to OUT's stem + _files/ beside it")] = None,
           format: Annotated[str, typer.Option(
               "--format", help="html (one self-contained file) | markdown (+ SVG figures)")
           ] = "html", replace_symlink: ReplaceSymlinkOpt = False) -> None:
    """Write the sweep's report: verdict sentences, leaderboard with CIs and per-seed dots,
    the ablation tables beside the paper's figures, LR stability, scaling, training curves,
    probes, each variant's config diff vs the baseline and every run's provenance. HTML opens
    from disk with no server and no network."""
    if format not in FORMATS:
        raise UserError(f"--format: {format!r} is not one of {', '.join(FORMATS)}")
    open_sweep(db, sweep)  # a missing DB or an unknown sweep: one line, nothing written
    target = out_file or Path(f"{sweep}-report{FORMATS[format]}")
    if str(target) == "-":
        raise UserError("--out -: a report is a file (HTML, or Markdown with figures); give a "
                        "file path")
    check_target(target, replace_symlink)  # before the build (seconds), as write_files will
    with tempfile.TemporaryDirectory(prefix="gatesweep-report-") as tmp:
        built = Path(tmp) / f"report{FORMATS[format]}"
        figures = Path(tmp) / "figures"
        # the DB URL (a password, maybe) in the child's environment, not on its command line
        # (which `ps` shows every user)
        cmd = python_command("dashboard.report", sweep, "--out", str(built), "--format", format,
                             "--figures", str(figures), "--link-as", f"{target.stem}_files")
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              env=child_env({DB_ENV: db_url(db)}))
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError("report: " + (
                memlimit.said(proc.stderr, "the report builder", memlimit.REPORT_MIB)
                or f"the report builder failed ({last})"))
        files = {target: _copy(built)}
        if format == "markdown":
            fig_dir = out_dir(target.with_name(target.stem + "_files"), replace_symlink)
            # the Markdown links them there already (--link-as)
            files.update({fig_dir / p.name: _copy(p) for p in sorted(figures.glob("*.svg"))})
        write_files(files, replace_symlink)
    size = target.stat().st_size
    out.print(f"report: {target} ({size / 2**20:.2f} MiB)"
              + (f" and {len(files) - 1} figure(s) in {target.stem}_files/" if len(files) > 1
                 else ""), highlight=False)
