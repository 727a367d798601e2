"""``python -m dashboard.report SWEEP --db URL --out FILE [--format html|markdown]``: write the
sweep's report (dashboard/report/__init__.py). ``orchestrator report`` runs this; it writes
FILE (and, for Markdown, FILE's figures into FIGURES beside it) and prints the paths."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dashboard.report import html, markdown, vega
from dashboard.report.model import Chart

FORMATS = ("html", "markdown")


def write(sweep: str, url: str, out: Path, fmt: str, figures: Path | None = None,
          link_as: str | None = None) -> list[Path]:
    """Build and write the report; returns the files written (the report first). The
    Markdown links its figures by ``link_as`` (a folder relative to ``out``, where they will
    be moved), else by where they are written, relative to ``out``."""
    import results_db
    from dashboard.report import content

    db = results_db.open(url, readonly=True)
    try:
        report = content.build(db, sweep)
    finally:
        db.close()
    if fmt == "html":
        out.write_text(html.render(report, vega.javascript_bundle()), encoding="utf-8")
        return [out]
    fig_dir = figures or out.with_name(out.stem + "_files")
    fig_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    def figure(chart: Chart) -> str:
        path = fig_dir / f"{chart.id}.svg"
        path.write_text(vega.svg(chart.spec), encoding="utf-8")
        written.append(path)
        return path.name

    link = link_as or Path(os.path.relpath(fig_dir, out.parent)).as_posix()
    out.write_text(markdown.render(report, link, figure), encoding="utf-8")
    return [out, *written]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dashboard.report", description=__doc__)
    ap.add_argument("sweep")
    ap.add_argument("--db", default=None,
                    help="Results DB URL (default: $GATESWEEP_DB, else sqlite:///results.db; "
                         "`orchestrator report` passes it there, off the command line)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--format", choices=FORMATS, default="html")
    ap.add_argument("--figures", type=Path, default=None,
                    help="Folder for the Markdown figures (default: OUT's stem + _files)")
    ap.add_argument("--link-as", default=None,
                    help="The folder, relative to OUT, the Markdown links its figures by "
                         "(where they will be moved; default: FIGURES relative to OUT)")
    args = ap.parse_args(argv)
    try:
        from results_db import default_url  # sqlalchemy: only when a report is built

        url = args.db or default_url()
        for path in write(args.sweep, url, args.out, args.format, args.figures,
                          args.link_as):
            print(path)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
