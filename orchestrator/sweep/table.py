"""The expanded-run table printed by ``validate`` and ``submit --dry-run``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from contract.config import ModelConfig
from contract.params import count
from orchestrator.sweep.expand import ExpandedRun


def gate_label(run: ExpandedRun) -> str:
    m = run.spec.model
    gates = "+".join(g.label for g in m.gates)
    if m.nonlinearity != "none":
        gates = (gates + "+" if gates else "") + f"nonlin:{m.nonlinearity}"
    return gates or "-"


def param_counts(runs: Sequence[ExpandedRun]) -> dict[str, tuple[int, int] | None]:
    """(total, gates) per run name: contract.params.count (arithmetic, no torch), computed
    once per distinct model shape (a 5,000-run grid has a handful)."""

    cache: dict[ModelConfig, tuple[int, int]] = {}
    out: dict[str, tuple[int, int] | None] = {}
    for r in runs:
        m = r.spec.model
        if m not in cache:
            cache[m] = count(m)
        out[r.name] = cache[m]
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


RICH_MAX_ROWS = 200  # rich lays out ~1 ms per row: bigger tables print as plain columns
_RIGHT = ("lr", "seed", "steps", "params", "gate params", "tokens")


def print_runs(console: Console, title: str, runs: Sequence[ExpandedRun],
               status: dict[str, str] | None = None, with_params: bool = True) -> None:
    counts = param_counts(runs) if with_params else {}
    cols = ["name", "variant", "gates", "lr", "seed", "steps", "params", "gate params", "tokens"]
    if status is not None:
        cols.append("db")
    body = []
    for row in run_rows(runs, counts):
        cells = [row["name"], row["variant"], row["gates"], f"{row['lr']:.3g}", str(row["seed"]),
                 str(row["steps"]), _opt(row["params"]), _opt(row["gate_params"]),
                 human(row["tokens"])]
        if status is not None:
            cells.append(status.get(row["name"], "new"))
        body.append(cells)
    if len(body) > RICH_MAX_ROWS:
        console.print(title, markup=False)
        console.out(plain_table(cols, body), highlight=False)
        return
    table = Table(title=title, show_lines=False)
    for c in cols:
        table.add_column(c, justify="right" if c in _RIGHT else "left")
    for cells in body:
        table.add_row(*cells)
    console.print(table)


def plain_table(cols: list[str], body: list[list[str]]) -> str:
    """Space-aligned columns (a 5,000-run grid prints in milliseconds, not seconds)."""
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(cols)]

    def line(cells: list[str]) -> str:
        return "  ".join(v.rjust(w) if c in _RIGHT else v.ljust(w)
                         for c, v, w in zip(cols, cells, widths)).rstrip()

    return "\n".join([line(cols), "  ".join("-" * w for w in widths), *map(line, body)])


def _opt(n: int | None) -> str:
    return "?" if n is None else human(n)


