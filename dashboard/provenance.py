"""Provenance (results_db's ``db.provenance``) as display strings, for Run detail and the
sweep report: one row per attempt (or per run), the code version short, the device and the CPU
in words. Formatting only."""

from __future__ import annotations

from typing import Any

import polars as pl

from contract.provenance import short_key

# The columns shown, after the run/attempt ones; "code" and "device" are composed below.
COLUMNS: tuple[str, ...] = ("code", "python", "torch", "deepspeed", "ray", "polars",
                            "sqlalchemy", "device", "cpu")
# results_db's mixing columns (results_db/analysis/mixing.py) -> the column that shows them
SHOWN_AS: dict[str, str] = {"code_version": "code", "python": "python", "torch": "torch",
                            "deepspeed": "deepspeed", "accelerator": "device"}


def device(r: dict[str, Any]) -> str:
    model = f" {r['device_count']} x {r['device_model']}" if r["device_model"] else ""
    return f"{r['accelerator']}{model}, {r['world_size']} rank(s)"


def display_frame(prov: pl.DataFrame, keys: tuple[str, ...] = ("attempt",)) -> pl.DataFrame:
    """``keys`` (some of run, variant, status, attempt) then COLUMNS, as strings."""
    rows = [{**{k: str(r[k]) for k in keys},
             "code": short_key(r["code_version"]),
             **{k: r[k] or "?" for k in COLUMNS if k not in ("code", "device", "cpu")},
             "device": device(r),
             "cpu": f"{r['cpu_model'] or '?'} ({r['cpu_threads'] or '?'} threads)"}
            for r in prov.iter_rows(named=True)]
    return pl.DataFrame(rows, schema={c: pl.String for c in (*keys, *COLUMNS)})
