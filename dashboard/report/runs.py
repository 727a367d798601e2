"""The report's per-run sections: training curves (the seed mean of each variant and LR, the
dashboard's curve spec), each variant's config diff vs the baseline, and the provenance of
every run (code version, packages, device) with the columns that differ flagged."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import polars as pl

from contract.metrics import TRAIN_LOSS, VAL_LOSS
from dashboard import charts, curvedata
from dashboard.configdiff import config_diff as diff_configs
from dashboard.provenance import COLUMNS, SHOWN_AS, display_frame
from dashboard.report.model import Block, Section, Table, chart
from dashboard.tables import fmt_lr, row_labels
from results_db.analysis.mixing import MIX_COLUMNS
from results_db.schema.vocab import RESULT_STATES

if TYPE_CHECKING:
    from results_db import ResultsDB
    from results_db.analysis.mixing import CodeMix

CURVES = ((TRAIN_LOSS, "training loss"), (VAL_LOSS, "validation loss"))
MAX_POINTS = 200  # per run and metric (downsampled in the DB); the chart shows 200 x bins


def curves(db: ResultsDB, sweep: str, colors: dict[str, str]) -> Section | None:
    """Per metric, each (variant, LR) row's seed mean with a ±1 std band over its runs."""
    runs = db.runs(sweep, status=list(RESULT_STATES), with_config=False,
                   columns=["id", "variant", "lr"])
    if runs.is_empty():
        return None
    runs = runs.with_columns(row_labels(runs), pl.col("lr").map_elements(
        fmt_lr, return_dtype=pl.String))
    ids = runs["id"].to_list()
    points = db.curves(ids, [m for m, _ in CURVES], MAX_POINTS)
    blocks: list[Block] = []
    for name, title in CURVES:
        pts = points.filter(pl.col("name") == name).join(
            runs.select(pl.col("id").alias("run_id"), "variant", "row", "lr"), on="run_id")
        if pts.is_empty():
            continue
        pts = pts.select("run_id", "variant", "row", "lr", pl.col("step").cast(pl.Float64)
                         .alias("x"), "value")
        mean = curvedata.seed_mean(pts)
        blocks.append(chart(f"curve-{name.replace('/', '-')}",
                            f"{name}: mean over seeds ± 1 std, per variant (dashed by LR)",
                            charts.curves(mean, name, colors, x="x", x_title="step",
                                          band=True)))
    if not blocks:
        return None
    return Section("curves", "Training curves", (), tuple(blocks))


def config_diff(db: ResultsDB, sweep: str, baseline: str | None) -> Section | None:
    """Each variant's first run against the baseline's first run at the same LR (else the
    baseline's first run): the config keys that differ."""
    if baseline is None:
        return None
    frame = db.runs(sweep, columns=["id", "variant", "lr"])
    first = frame.sort("id").group_by("variant", maintain_order=True).first()
    base_rows = frame.filter(pl.col("variant") == baseline).sort("id")
    base_at = {lr: json.loads(c) for lr, c in
               base_rows.group_by("lr", maintain_order=True).first()
               .select("lr", "config").iter_rows()}
    fallback = json.loads(base_rows["config"][0])
    rows = []
    for variant, lr, config in first.select("variant", "lr", "config").iter_rows():
        if variant == baseline:
            continue
        for key, this, base in diff_configs(json.loads(config), base_at.get(lr, fallback)):
            rows.append({"variant": variant, "key": key, "variant's value": this,
                         "baseline's value": base})
    table = pl.DataFrame(rows, schema={c: pl.String for c in (
        "variant", "key", "variant's value", "baseline's value")})
    return Section("config", f"Config diff vs the baseline '{baseline}'", (), (
        Table("config-diff", table, "each variant's first run vs the baseline's first run at "
                                    "the same learning rate; run names and seeds left out"),))


def provenance(db: ResultsDB, sweep: str, mix: CodeMix) -> Section:
    """Which code, packages and machine produced each run's result (its newest attempt): the
    distinct combinations with their run counts, then every run (folded); the columns that
    make the comparison mixed (results_db/analysis/mixing.py) are flagged."""
    prov = db.provenance(sweep=sweep, latest=True)
    if prov.is_empty():
        return Section("provenance", "Provenance", (
            "No run of this sweep recorded its provenance (trained before it was recorded).",))
    shown = display_frame(prov, ("run", "variant", "status", "attempt"))
    flagged = frozenset(SHOWN_AS[c] for c in MIX_COLUMNS if c in mix.differing)
    combos = shown.group_by(list(COLUMNS), maintain_order=True).len("runs") \
        .with_columns(pl.col("runs").cast(pl.String))
    said = [mix.sentence] if mix.sentence else [
        f"All {mix.n_recorded} runs compared were trained by the same code and packages."]
    return Section("provenance", "Provenance", tuple(said), (
        Table("provenance-table", combos.select("runs", *COLUMNS),
              "each distinct combination of code version, packages and machine, with the "
              "number of runs it trained; flagged columns differ between compared runs",
              flagged),
        Table("provenance-runs", shown, "every run: its newest attempt's provenance",
              flagged, collapsed=True)))
