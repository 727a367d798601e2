"""The paper-style tables of a finished sweep beside the paper's numbers, as Markdown
(docs/reproduction.md is built from this output).

    python benchmarks/reproduction_table.py --db sqlite:////tmp/gates_run/results.db \
        --sweep gates-toy [--out table.md]

No rule of its own: every mean, Δ, 95 % CI, verdict, main effect and max stable LR comes from
results_db's AnalysisMixin (db.findings, db.ablation_table, db.effects, db.stability),
laid out by the dashboard's own table builder (dashboard/ablation.py: the same rows, paper
mapping and "Agree" column as the "Ablation tables" page). The DB is opened read-only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import polars as pl

import results_db


def effects_table(db: Any, sweep: str) -> pl.DataFrame:
    """db.effects formatted: dimension, value, variants, runs, mean Δ PPL % [95 % CI], verdict."""
    from dashboard.tables import fmt_delta_ci

    eff = db.effects(sweep)
    return pl.DataFrame([{"Dimension": r["dimension"], "Value": r["value"],
                          "Variants": str(r["n_variants"]), "Runs": str(r["n_runs"]),
                          "mean ΔPPL [95% CI]": fmt_delta_ci(r["mean_delta_pct"],
                                                             r["ci_low_pct"], r["ci_high_pct"]),
                          "Verdict": r["verdict"]} for r in eff.iter_rows(named=True)],
                        schema={c: pl.String for c in ("Dimension", "Value", "Variants", "Runs",
                                                       "mean ΔPPL [95% CI]", "Verdict")})


def stability_curve(st: Any) -> pl.DataFrame:
    """db.stability(...).curve formatted: final val/loss vs LR relative to the best LR."""
    from dashboard.tables import fmt_lr, fmt_mean_std, fmt_num, fmt_pct

    return pl.DataFrame([{"Variant": r["variant"], "LR": fmt_lr(r["lr"]), "n": str(r["n"]),
                          "val/loss": fmt_mean_std(r["mean"], r["std"]),
                          "vs best": fmt_pct(None if r["rel_to_best"] is None
                                             else 100 * r["rel_to_best"]),
                          "Diverged": str(r["diverged"]), "Spikes": fmt_num(r["loss_spikes"]),
                          "Max act": fmt_num(r["max_activation"]),
                          "Stable": "yes" if r["stable"] else "no"}
                         for r in st.curve.iter_rows(named=True)])


def render(url: str, sweep: str) -> str:
    from dashboard import ablation
    from dashboard.export import to_markdown

    db = results_db.open(url, readonly=True)
    names = db.summary_names(sweep)
    if not names:
        raise SystemExit(f"--sweep: no finished runs with results in sweep {sweep!r} ({db.url})")
    st = db.stability(sweep)
    tables = {}
    for kind in ("quality", "probes", "stability"):
        metrics = ablation.metric_names(kind, names)
        tables[kind] = ablation.build(kind, db.ablation_table(sweep, metrics), metrics,
                                      with_paper=True, max_stable_lr=db.max_stable_lr(sweep))
    out = [f"### Quality (val PPL) — sweep `{sweep}`, baseline `{tables['quality'].baseline}`\n",
           db.findings(sweep).text() + "\n", ablation.SCALE_CAVEAT + "\n",
           to_markdown(tables["quality"].display),
           "### Main effects of each dimension (mean ΔPPL over the other dimensions)\n",
           to_markdown(effects_table(db, sweep)),
           "### Gate scores, massive activations, first-token attention (paper Table 4)\n",
           to_markdown(tables["probes"].display),
           "### Stability\n", to_markdown(tables["stability"].display)]
    if st is not None:
        out += [f"{st.rule}\n", to_markdown(stability_curve(st))]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
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
