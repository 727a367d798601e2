"""Read-side commands: status, runs, show, query, export (all through results_db's API).

Every one opens the DB read-only (``open_read``: SQLite ``mode=ro``): it is never created,
migrated or switched to WAL, and its bytes never change; a missing DB is an error (exit 2).
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml
from rich.table import Table

import results_db
from contract.errors import UserError
from contract.provenance import short_key
from contract.states import STATUS_GROUPS, RunStatus
from orchestrator.cli.app import (
    DbOpt,
    ReplaceSymlinkOpt,
    StaleOpt,
    app,
    open_read,
    open_sweep,
    out,
    split_csv,
    stale_after,
)
from orchestrator.cli.frame_format import csv_text, json_text, write_stdout
from orchestrator.cli.outfiles import Writer, write_files
from orchestrator.cli.outfiles import out_dir as make_dir
from orchestrator.sweep.decide import progress_line
from orchestrator.sweep.spec import stored_decide as decide_of

if TYPE_CHECKING:
    import polars as pl

    from orchestrator.sweep.decide import DecideSpec
    from results_db import ResultsDB
    from results_db.analysis.decide_rule import DecideRule

RUN_IDS = ("id", "name", "sweep", "variant", "seed", "status")


def run_columns(frame: pl.DataFrame) -> tuple[str, ...]:
    """A run's identity, the dimensions (contract/dimensions.py) that tell these runs apart, in
    the table's order, and its size."""
    dims = [c for c in results_db.DIMENSIONS if c in frame.columns and frame[c].n_unique() > 1]
    return (*RUN_IDS, *dims, "params_total")


def print_frame(frame: pl.DataFrame, title: str | None = None,
                columns: tuple[str, ...] | None = None) -> None:
    cols = [c for c in (columns or frame.columns) if c in frame.columns]
    t = Table(title=title)
    for c in cols:
        t.add_column(c)
    for row in frame.select(cols).iter_rows():
        t.add_row(*("" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)
                    for v in row))
    out.print(t)


@app.command()
def status(sweep: Annotated[str | None, typer.Argument()] = None, db: DbOpt = None,
           stale: StaleOpt = None) -> None:
    """Counts by state per sweep (grouped done-ok / done-bad / live / waiting), with an ETA;
    the running runs with the age of their last heartbeat, flagging stale ones (read-only:
    `submit`/`rerun` are what mark them lost)."""
    import polars as pl


    d = open_sweep(db, sweep)
    frame = d.sweep_status(sweep)
    live = d.live_runs(sweep)
    etas = [_fmt_eta(sweep_eta(live.filter(pl.col("sweep") == s))) for s in frame["sweep"]]
    groups = [pl.sum_horizontal([pl.col(st.value) for st in members if st.value in frame.columns]
                                or [pl.lit(0)]).alias(name)
              for name, members in STATUS_GROUPS.items()]
    print_frame(frame.with_columns(*groups, pl.Series("eta", etas, dtype=pl.Utf8)), "sweeps")
    running = live.filter(pl.col("status") == RunStatus.RUNNING)
    # an explicit --stale-after / $GATESWEEP_STALE_AFTER wins; else each attempt's own
    # threshold (a few of its heartbeat intervals: contract.states.stale_after_s)
    explicit = stale_after(stale)
    flag = (pl.col("heartbeat_age_s") > explicit) if explicit is not None else pl.col("stale")
    running = running.with_columns(flag.fill_null(False).alias("stale"))
    if running.height:
        print_frame(running.with_columns(pl.format("{}/{}", "step", "steps_total").alias("step")),
                    "live runs", ("run_id", "name", "step", "last_loss", "heartbeat_age_s",
                                  "eta_s", "owner", "stale"))
    stale_runs = running.filter(pl.col("stale"))
    if stale_runs.height:
        limit = f"{explicit:g} s" if explicit is not None else "a few heartbeat intervals"
        out.print(f"{stale_runs.height} running run(s) sent no heartbeat for more than "
                  f"{limit} (probably lost; the next `orchestrator submit` or `rerun` "
                  "marks them lost): ids " + ", ".join(map(str, stale_runs["run_id"])))
    for name, text in d.sweeps().select("name", "spec").iter_rows():
        if sweep in (None, name):
            _decide_status(d, name, text)


def stored_decide(d: results_db.ResultsDB, name: str, spec_text: str | None = None
                  ) -> DecideSpec | None:
    """The ``decide:`` block of sweep ``name`` as stored with it; None for a fixed-seed sweep
    (or one stored by an older gatesweep whose file no longer validates)."""
    if spec_text is None:
        spec_text = next((t for n, t in d.sweeps().select("name", "spec").iter_rows()
                          if n == name), "")
    return decide_of(spec_text or "", name)


def stored_rule(d: results_db.ResultsDB, name: str, metric: str) -> DecideRule | None:
    """The stored ``decide:`` rule of sweep ``name`` when it reads ``metric``, else None (a
    fixed-seed sweep, or another metric: read fixed-n). Every command that states a verdict
    of an adaptive sweep passes it, so each surface reads the rows by the sweep's own rule."""
    decide = stored_decide(d, name)
    return decide.rule() if decide is not None and decide.metric == metric else None


def decide_shown(rows: pl.DataFrame, relative: bool) -> pl.DataFrame:
    """The decide rows as `status` shows them: the change is the leaderboard's (delta_pct,
    compare.pct_of_base, THE percentage rule; in the metric's units for an absolute margin),
    the interval the tested statistic's (sequential.py: per-seed relative differences)."""
    scale = 100.0 if relative else 1.0
    return rows.select("variant", "lr", seeds=rows["seeds"].list.len(), n_paired="n",
                       delta=rows["delta_pct"] if relative else rows["delta"],
                       low=rows["low"] * scale, high=rows["high"] * scale,
                       verdict="verdict", more_seeds="more_seeds")


def _decide_status(d: results_db.ResultsDB, name: str, spec_text: str) -> None:
    """For an adaptive (decide:) sweep: each row's seeds so far, its interval narrowing and
    whether it decided, and the budget spent vs left."""
    decide = stored_decide(d, name, spec_text)
    if decide is None:
        return
    rows = d.decide_rows(name, decide.rule())
    if rows.height:
        unit = " (%)" if decide.relative else ""
        print_frame(decide_shown(rows, decide.relative),
                    f"{name}: decide rows, delta vs baseline{unit} at "
                    f"{rows['level'][0]:.4f} per row (Bonferroni over {rows.height})")
    out.print(progress_line(d, name, decide, d.decide_spent(name)), highlight=False)


def sweep_eta(live: pl.DataFrame) -> float | None:
    """Seconds until a sweep's runs in flight and queued are done (None: unknown), from
    db.live_runs(): the slowest running run's own ETA, plus the queue at the mean run length
    (elapsed + ETA of the running ones) spread over the runs in flight."""
    import polars as pl

    running = live.filter(pl.col("status") == RunStatus.RUNNING)
    pending = live.filter(pl.col("status") == RunStatus.PENDING).height
    if running.height == 0 and pending == 0:
        return 0.0
    known = running.filter(pl.col("eta_s").is_not_null() & pl.col("started").is_not_null())
    if known.height == 0:
        return None

    now = datetime.now(timezone.utc)
    lengths = [(now - st).total_seconds() + eta for st, eta in
               zip(known["started"], known["eta_s"])]
    return float(max(known["eta_s"]) + pending * (sum(lengths) / len(lengths))
                 / max(1, running.height))


def _fmt_eta(s: float | None) -> str:
    if s is None:
        return "?"
    return "done" if s == 0 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"


@app.command()
def runs(db: DbOpt = None, sweep: Annotated[str | None, typer.Option()] = None,
         status: Annotated[str | None, typer.Option(help="e.g. failed,lost")] = None,
         gate_position: Annotated[str | None, typer.Option()] = None,
         variant: Annotated[str | None, typer.Option()] = None) -> None:
    """List runs with the dimensions that tell them apart."""
    # only the filters given: ResultsDB.runs reads a None filter as "IS NULL"
    dims: dict[str, Any] = {k: v for k, v in (("gate_position", gate_position),
                                               ("variant", variant)) if v}
    frame = open_sweep(db, sweep).runs(sweep=sweep, status=split_csv(status), **dims)
    print_frame(frame, f"{frame.height} runs", run_columns(frame))


@app.command()
def show(run: str, db: DbOpt = None) -> None:
    """One run: config, attempts, what produced each attempt (code version, packages,
    device), last metrics, summaries, error and traceback."""
    from orchestrator.run.driver.rerun import resolve_runs

    d = open_read(db)
    row = resolve_runs(d, [run])[0]  # unknown, or a name several runs share: one line
    out.print(f"run {row.id} {row.name}  status={row.status}  variant={row.variant}  "
              f"seed={row.seed}  fingerprint={row.fingerprint[:16]}")
    out.print(yaml.safe_dump(row.config, sort_keys=False).rstrip())
    attempts = d.attempts(row.id)
    t = Table(title="attempts")
    for c in ("#", "status", "started", "ended", "host", "pid", "error"):
        t.add_column(c)
    for a in attempts:
        t.add_row(str(a.number), a.status, str(a.started)[:19], str(a.ended or "")[:19],
                  a.host or "", str(a.pid or ""), (a.error or "")[:120])
    out.print(t)
    print_provenance(d, row.id)
    last = last_metrics(d, row.id)
    if last.height:
        print_frame(last, "last metrics")
    summ = d.summaries(run_ids=[row.id])
    if summ.height:
        print_frame(summ, "summaries", ("name", "value"))
    failed = [a for a in attempts if a.traceback]
    if failed:
        out.print(f"traceback of attempt {failed[-1].number}:\n{failed[-1].traceback}")


def print_provenance(d: ResultsDB, run_id: int) -> None:
    """What produced each attempt (db.provenance): code version, packages, device, CPU; the
    DeepSpeed config of the newest attempt as JSON."""
    prov = d.provenance(run_ids=[run_id])
    if prov.height == 0:
        out.print("provenance: not recorded (trained before provenance was recorded, or never "
                  "started)")
        return
    t = Table(title="provenance")
    for c in ("#", "code", "python", "torch", "deepspeed", "ray", "device", "cpu"):
        t.add_column(c)
    for r in prov.iter_rows(named=True):
        device = r["accelerator"] + (f" {r['device_count']} x {r['device_model']}"
                                     if r["device_model"] else "")
        t.add_row(str(r["attempt"]), short_key(r["code_version"]), r["python"] or "",
                  r["torch"] or "", r["deepspeed"] or "", r["ray"] or "",
                  f"{device}, {r['world_size']} rank(s)",
                  f"{r['cpu_model'] or '?'} ({r['cpu_threads'] or '?'} threads)")
    out.print(t)
    out.print(f"deepspeed config (attempt {prov['attempt'][-1]}): {prov['deepspeed_config'][-1]}")


def last_metrics(d: ResultsDB, run_id: int) -> pl.DataFrame:
    """name, step, value of each metric's newest point; downsampled reads keep every series'
    last point (results_db/read/downsample.py), so a run of 100k steps is not read in full."""
    m = d.metrics(run_ids=[run_id], max_points=64)
    if m.height == 0:
        return m
    return (m.sort("step").group_by("name", maintain_order=True).last()
            .select("name", "step", "value").sort("name"))


@app.command()
def query(sql: str, db: DbOpt = None,
          format: Annotated[str, typer.Option("--format", help="table|csv|json|parquet")
                            ] = "table",
          out_file: Annotated[Path | None, typer.Option(
              "--out", help="Write to FILE (a new or regular file; '-' is stdout)")] = None,
          timeout: Annotated[float, typer.Option(
              "--timeout", min=0.0, max=1e6,
              help="Seconds the statement may run (0: no limit)")] = 60.0,
          max_rows: Annotated[int, typer.Option("--max-rows", min=1, max=2**62)] = 1_000_000,
          max_mb: Annotated[float, typer.Option(
              "--max-mb", min=0.001, max=1e6,
              help="MiB of result data (and of any one value)")] = 256.0,
          replace_symlink: ReplaceSymlinkOpt = False) -> None:
    """Run read-only SQL (writes are refused) and print or save the result. The statement
    stops at --timeout, --max-rows or --max-mb, and on Ctrl-C. On PostgreSQL, a superuser
    role (or one holding pg_read_server_files / pg_execute_server_program) is refused: SQL
    from it reaches the server's files and programs, which no read-only transaction stops."""

    if format not in ("table", "csv", "json", "parquet"):
        raise UserError(f"--format: {format!r} is not one of table, csv, json, parquet")
    to_stdout = out_file is None or str(out_file) == "-"
    if format == "parquet" and to_stdout and sys.stdout.isatty():
        raise UserError("--format parquet needs --out FILE, or a pipe with --out - "
                        "(it is a binary format)")
    d = open_read(db)
    if why := d.query_privilege():
        raise UserError(f"query: {why}; its SQL could read server files or run programs "
                        "whatever the read-only transaction says. Connect as an ordinary "
                        "role (see docs/architecture.md, 'query on PostgreSQL')")
    limits = results_db.QueryLimits(timeout_s=timeout or None, max_rows=max_rows,
                                    max_bytes=int(max_mb * 2**20))
    try:
        frame = d.query(sql, limits)
    except results_db.ReadOnlyQueryError as exc:
        raise UserError(str(exc)) from None
    write_frame(frame, format, None if to_stdout else out_file, replace_symlink)


def write_frame(frame: pl.DataFrame, fmt: str, path: Path | None,
                replace_symlink: bool = False) -> None:
    if path is None:
        if fmt == "csv":
            write_stdout(csv_text(frame))
        elif fmt == "json":
            sys.stdout.write(json_text(frame.to_dicts()))
        elif fmt == "parquet":
            sys.stdout.flush()
            frame.write_parquet(sys.stdout.buffer)
        else:
            print_frame(frame)
        return

    # table to a file is CSV (a rich table is for terminals)
    writers: dict[str, Writer] = {
        "parquet": frame.write_parquet,
        "json": lambda fh: fh.write(json_text(frame.to_dicts()).encode("utf-8"))}
    write_files({path: writers.get(fmt, lambda fh: fh.write(csv_text(frame).encode("utf-8")))},
                replace_symlink)


@app.command()
def export(out_dir: Annotated[Path, typer.Option("--out", help="Directory for the Parquet "
                                                  "files")],
           db: DbOpt = None, sweep: Annotated[str | None, typer.Option()] = None,
           replace_symlink: ReplaceSymlinkOpt = False) -> None:
    """Write runs, summaries and metrics (optionally of one sweep) as Parquet files."""
    d = open_sweep(db, sweep)
    runs_f = d.runs(sweep=sweep)
    ids = [int(i) for i in runs_f["id"].to_list()] if runs_f.height else []

    frames = {"runs": runs_f, "summaries": d.summaries(run_ids=ids),
              "metrics": d.metrics(run_ids=ids)}
    where = make_dir(out_dir, replace_symlink)
    # all three or none: a failure leaves no mix of this export and an older one
    write_files({where / f"{name}.parquet": f.write_parquet for name, f in frames.items()},
                replace_symlink)
    for name, f in frames.items():
        out.print(f"{where / (name + '.parquet')}: {f.height} rows")
