"""The expanded-run table printed by ``validate`` and ``submit --dry-run``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from orchestrator.expand import ExpandedRun
from trainer.config import ModelConfig


def gate_label(run: ExpandedRun) -> str:
    m = run.spec.model
    gates = "+".join(g.label for g in m.gates)
    if m.nonlinearity != "none":
        gates = (gates + "+" if gates else "") + f"nonlin:{m.nonlinearity}"
    return gates or "-"


def param_counts(runs: Sequence[ExpandedRun]) -> dict[str, tuple[int, int] | None]:
    """(total, gates) per run name, counted on the meta device (no memory, no init).

    torch is imported lazily: validating a file should not pay for it unless asked.
    """
    try:
        from trainer.params import count_params
    except ImportError:
        return {r.name: None for r in runs}
    cache: dict[str, tuple[int, int]] = {}
    out: dict[str, tuple[int, int] | None] = {}
    for r in runs:
        key = r.spec.model.model_dump_json()
        if key not in cache:
            c = count_params(r.spec.model)
            cache[key] = (c.total, c.gates)
        out[r.name] = cache[key]
    return out


def human(n: float) -> str:
    for unit, div in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.3g}{unit}"
    return str(int(n))


def run_rows(runs: Sequence[ExpandedRun], counts: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        c = counts.get(r.name)
        rows.append({
            "name": r.name, "variant": r.variant, "gates": gate_label(r),
            "lr": r.spec.train.lr, "seed": r.seed, "steps": r.spec.train.steps,
            "params": c[0] if c else None, "gate_params": c[1] if c else None,
            "tokens": r.spec.train.steps * r.spec.tokens_per_step,
            "fingerprint": r.fingerprint[:12],
        })
    return rows


def print_runs(console: Console, title: str, runs: Sequence[ExpandedRun],
               status: dict[str, str] | None = None, with_params: bool = True) -> None:
    counts = param_counts(runs) if with_params else {}
    table = Table(title=title, show_lines=False)
    cols = ["name", "variant", "gates", "lr", "seed", "steps", "params", "gate params", "tokens"]
    if status is not None:
        cols.append("db")
    for c in cols:
        table.add_column(c, justify="right" if c in ("lr", "seed", "steps", "params",
                                                      "gate params", "tokens") else "left")
    for row in run_rows(runs, counts):
        cells = [row["name"], row["variant"], row["gates"], f"{row['lr']:.3g}", str(row["seed"]),
                 str(row["steps"]), _opt(row["params"]), _opt(row["gate_params"]),
                 human(row["tokens"])]
        if status is not None:
            cells.append(status.get(row["name"], "new"))
        table.add_row(*cells)
    console.print(table)


def _opt(n: int | None) -> str:
    return "?" if n is None else human(n)


def model_shape(m: ModelConfig) -> str:
    ffn = f"d_ff={m.d_ff}" if m.d_ff else f"moe={m.moe.n_experts}x{m.moe.top_k}" if m.moe else ""
    return f"L{m.n_layer} d{m.d_model} h{m.n_head}/kv{m.n_kv_head} {ffn}"
