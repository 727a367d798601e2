"""The long-context table (paper Table 5 style): one row per variant, one column per RoPE
extension method and length factor found in the sweep's summaries.

Metric names (contract/metrics.py): ``longctx/<method>/<f>x/{ppl,tail_ppl,retrieval_acc}``.
The table shows ``ppl`` and ``retrieval_acc``; methods in the paper's order (none, linear, ntk,
yarn; others after, by name), factors ascending. The paper's Table 5 reports RULER accuracy at
4k-128k tokens on a 15A2B model, not PPL: it is not put beside ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from contract.metrics import LONGCTX_NAME

METHOD_ORDER: tuple[str, ...] = ("none", "linear", "ntk", "yarn")
SHOWN: tuple[str, ...] = ("ppl", "retrieval_acc")  # tail_ppl: in the DB, not in the table


@dataclass(frozen=True)
class LongCtxColumn:
    metric: str  # longctx/yarn/4x/ppl
    method: str
    factor: int
    kind: str  # ppl | retrieval_acc

    @property
    def label(self) -> str:
        """'yarn 4x PPL' / 'yarn 4x retrieval'."""
        return f"{self.method} {self.factor}x " + ("PPL" if self.kind == "ppl" else "retrieval")


def columns(names: Iterable[str]) -> list[LongCtxColumn]:
    """The long-context columns among summary ``names``: all PPL columns, then all retrieval
    columns, each by method (paper order) then factor."""
    found = []
    for name in set(names):
        hit = LONGCTX_NAME.match(name)
        if hit:
            found.append(LongCtxColumn(name, hit["method"], int(hit["factor"]), hit["kind"]))

    def key(c: LongCtxColumn) -> tuple[int, int, str, int]:
        rank = METHOD_ORDER.index(c.method) if c.method in METHOD_ORDER else len(METHOD_ORDER)
        return SHOWN.index(c.kind), rank, c.method, c.factor

    return sorted(found, key=key)
