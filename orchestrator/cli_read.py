"""Read-side commands: status, runs, show, query, export (all through results_db)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.table import Table

from orchestrator.cli import DbOpt, StaleOpt, _split, app, db_url, out, stale_after
from orchestrator.errors import UserError

RUN_COLS = ("id", "name", "sweep", "variant", "seed", "status", "gate_position",
            "gate_granularity", "nonlinearity", "lr", "params_total")


def print_frame(frame: Any, title: str | None = None, columns: tuple[str, ...] | None = None
                ) -> None:
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
    """Counts by state per sweep, with an ETA; stale running runs become lost first."""
    import results_db

    d = results_db.open(db_url(db))
    lost = d.reconcile(stale_after_s=stale_after(stale))
    frame = d.sweep_status(sweep)
    if sweep is not None and frame.height == 0:
        raise UserError(f"no sweep named {sweep!r} in {d.url}")
    etas = {name: eta_seconds(d, name) for name in frame["sweep"].to_list()}
    import polars as pl

    frame = frame.with_columns(pl.Series("eta", [_fmt_eta(etas[s]) for s in frame["sweep"]]))
    print_frame(frame, "sweeps")
    if lost:
        out.print(f"{len(lost)} run(s) had no heartbeat and are now lost: ids "
                  + ", ".join(map(str, lost)))


def eta_seconds(d: Any, sweep: str) -> float | None:
    """Remaining runs x mean finished-attempt duration / runs in flight (None: unknown)."""
    rows = d.query(
        "SELECT r.status, a.started, a.ended FROM runs r JOIN sweeps w ON w.id = r.sweep_id "
        "LEFT JOIN attempts a ON a.run_id = r.id "
        f"WHERE w.name = '{sweep.replace(chr(39), chr(39) * 2)}'")
    if rows.height == 0:
        return None
    todo = rows.filter(rows["status"].is_in(["pending", "running"]))["status"]
    remaining = todo.len()
    if remaining == 0:
        return 0.0
    durations = [(_ts(e) - _ts(s)).total_seconds()
                 for st, s, e in rows.iter_rows() if s is not None and e is not None
                 and st in ("succeeded", "diverged")]
    if not durations:
        return None
    in_flight = max(1, int((todo == "running").sum()))
    return sum(durations) / len(durations) * remaining / in_flight


def _ts(v: Any) -> datetime:
    if isinstance(v, datetime):
        return v if v.tzinfo else v.replace(tzinfo=timezone.utc)
    dt = datetime.fromisoformat(str(v))
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def _fmt_eta(s: float | None) -> str:
    if s is None:
        return "?"
    return "done" if s == 0 else f"{s / 60:.1f} min" if s >= 60 else f"{s:.0f} s"


@app.command()
def runs(db: DbOpt = None, sweep: Annotated[str | None, typer.Option()] = None,
         status: Annotated[str | None, typer.Option(help="e.g. failed,lost")] = None,
         gate_position: Annotated[str | None, typer.Option()] = None,
         variant: Annotated[str | None, typer.Option()] = None) -> None:
    """List runs with their gate dimensions."""
    import results_db

    dims = {k: v for k, v in (("gate_position", gate_position), ("variant", variant)) if v}
    frame = results_db.open(db_url(db)).runs(sweep=sweep, status=_split(status), **dims)
    print_frame(frame, f"{frame.height} runs", RUN_COLS)


@app.command()
def show(run: str, db: DbOpt = None) -> None:
    """One run: config, attempts, last metrics, summaries, error and traceback."""
    import results_db

    from orchestrator.rerun import resolve_runs

    d = results_db.open(db_url(db))
    row = resolve_runs(d, [run])[0]
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
    last = d.query(
        "SELECT m.name, m.step, m.value FROM metrics m JOIN (SELECT name, MAX(step) AS s FROM "
        f"metrics WHERE run_id = {row.id} GROUP BY name) x ON m.name = x.name AND m.step = x.s "
        f"WHERE m.run_id = {row.id} ORDER BY m.name")
    if last.height:
        print_frame(last, "last metrics")
    summ = d.summaries(run_ids=[row.id])
    if summ.height:
        print_frame(summ, "summaries", ("name", "value"))
    failed = [a for a in attempts if a.traceback]
    if failed:
        out.print(f"traceback of attempt {failed[-1].number}:\n{failed[-1].traceback}")


@app.command()
def query(sql: str, db: DbOpt = None,
          format: Annotated[str, typer.Option("--format", help="table|csv|json|parquet")
                            ] = "table",
          out_file: Annotated[Path | None, typer.Option("--out")] = None) -> None:
    """Run read-only SQL (writes are refused) and print or save the result."""
    import results_db

    if format not in ("table", "csv", "json", "parquet"):
        raise UserError(f"--format: {format!r} is not one of table, csv, json, parquet")
    if format == "parquet" and out_file is None:
        raise UserError("--format parquet needs --out FILE (it is a binary format)")
    try:
        frame = results_db.open(db_url(db)).query(sql)
    except results_db.ReadOnlyQueryError as exc:
        raise UserError(str(exc)) from None
    write_frame(frame, format, out_file)


def write_frame(frame: Any, fmt: str, path: Path | None) -> None:
    if fmt == "parquet":
        frame.write_parquet(path)
    elif fmt == "csv":
        text = frame.write_csv()
        path.write_text(text) if path else sys.stdout.write(text)
    elif fmt == "json":
        text = json.dumps(frame.to_dicts(), default=str, indent=1) + "\n"
        path.write_text(text) if path else sys.stdout.write(text)
    elif path is not None:
        path.write_text(frame.write_csv())
    else:
        print_frame(frame)


@app.command()
def export(out_dir: Annotated[Path, typer.Option("--out", help="Directory for the Parquet "
                                                  "files")],
           db: DbOpt = None, sweep: Annotated[str | None, typer.Option()] = None) -> None:
    """Write runs, summaries and metrics (optionally of one sweep) as Parquet files."""
    import results_db

    d = results_db.open(db_url(db))
    runs_f = d.runs(sweep=sweep)
    if sweep is not None and runs_f.height == 0:
        raise UserError(f"no runs for sweep {sweep!r} in {d.url}")
    ids = [int(i) for i in runs_f["id"].to_list()] if runs_f.height else []
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = {"runs": runs_f, "summaries": d.summaries(run_ids=ids),
              "metrics": d.metrics(run_ids=ids)}
    for name, f in frames.items():
        f.write_parquet(out_dir / f"{name}.parquet")
        out.print(f"{out_dir / (name + '.parquet')}: {f.height} rows")
