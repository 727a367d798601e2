"""The paper-style tables of a finished sweep beside the paper's numbers, as Markdown
(docs/reproduction.md is built from this output).

    python benchmarks/reproduction_table.py --db sqlite:////tmp/gates_run/results.db \
        --sweep gates-toy [--out table.md]

Reads the sweep through results_db (runs + summaries) and lays it out with the dashboard's own
table builder (dashboard/ablation.py, the same rows and paper mapping as the "Ablation tables"
page), then adds a direction check: for each variant with a paper row, the sign of its PPL
change vs the baseline, ours and the paper's (Table 1 15A2B MoE, baseline 6.026).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import polars as pl

import results_db


def _quiet_streamlit() -> None:
    """dashboard.data's cache decorators warn "No runtime found" outside a Streamlit server."""
    import streamlit  # noqa: F401  (configures its loggers, which we then quieten)

    for name in list(logging.root.manager.loggerDict):
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)


def sweep_frames(db: Any, sweep: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs with the dashboard's dimension columns, long summaries run_id/name/value)."""
    _quiet_streamlit()
    from dashboard.data import RUN_COLUMNS

    runs = db.runs(sweep=sweep, with_config=False, columns=RUN_COLUMNS)
    if runs.height == 0:
        raise SystemExit(f"--sweep: no runs of sweep {sweep!r} in {db.url}")
    runs = runs.with_columns(pl.col("gate_input_dependent").cast(pl.Boolean))
    return runs, db.summaries(sweep=sweep).select("run_id", "name", "value")


def direction_table(quality: Any) -> pl.DataFrame:
    """Per variant: our ΔPPL % vs the baseline, the paper's, and whether the signs agree."""
    from dashboard import paper

    num = quality.numeric
    paper_base = paper.to_float(paper.load_table("table1")[0]["Avg PPL"])  # row 1: baseline
    rows = []
    for r, shown in zip(num.iter_rows(named=True), quality.display.iter_rows(named=True),
                        strict=True):
        p = paper.to_float(shown.get("Paper PPL"))
        if p is None or r["delta_pct"] is None or not paper_base:
            continue
        ours, theirs = r["delta_pct"], 100.0 * (p - paper_base) / paper_base
        agree = "–" if abs(theirs) < 1e-9 or abs(ours) < 1e-9 else \
            ("yes" if (ours < 0) == (theirs < 0) else "no")
        rows.append({"Variant": shown["Variant"], "ours ΔPPL %": f"{ours:+.2f}",
                     "paper ΔPPL %": f"{theirs:+.2f}", "same direction": agree})
    return pl.DataFrame(rows)


def render(url: str, sweep: str) -> str:
    from dashboard import ablation
    from dashboard.export import to_markdown

    db = results_db.open(url)
    runs, summaries = sweep_frames(db, sweep)
    quality = ablation.build("quality", runs, summaries, with_paper=True)
    probes = ablation.build("probes", runs, summaries, with_paper=True)
    stab = ablation.build("stability", runs, summaries, with_paper=True,
                          max_stable_lr=db.max_stable_lr(sweep))
    return "\n".join([
        f"### Quality (val PPL) — sweep `{sweep}`, baseline `{quality.baseline}`\n",
        to_markdown(quality.display),
        "### Direction of the PPL change vs the baseline (ours vs paper Table 1)\n",
        to_markdown(direction_table(quality)),
        "### Gate scores, massive activations, first-token attention (paper Table 4)\n",
        to_markdown(probes.display),
        "### Stability\n",
        to_markdown(stab.display)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="results DB URL")
    ap.add_argument("--sweep", default="gates-toy")
    ap.add_argument("--out", type=Path, help="write the Markdown here (default: stdout)")
    args = ap.parse_args(argv)
    text = render(args.db, args.sweep)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
