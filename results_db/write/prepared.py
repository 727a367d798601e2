"""Statements of the trial's write path, built once and compiled once per dialect.

A trial writes two short transactions (claim, end) of ~10 statements in all. Built with
SQLAlchemy at every call, each statement cost ~315 us of client CPU against ~80 us for the
same SQL sent as text (PostgreSQL, this machine: building the construct, its cache key and
the cache lookup, then the execution context); in a 1,000-run sweep on 2 cores, where every
trial's CPU is shared, that was a tenth of gatesweep's extra CPU per run (docs/benchmarks.md
"Per-run overhead, round 6"). A ``Prepared`` keeps the SQLAlchemy construct as the one
statement of record -- its SQL is the schema's, compiled by the dialect -- and runs the
compiled text with the types' bind processors applied, as SQLAlchemy would.

Only for statements whose shape never changes: every value is a ``bindparam`` (``arg``), and
literal lists (``IN (...)`` of constants) are rendered at compile time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from sqlalchemy import BindParameter, CursorResult, bindparam
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement


def arg(name: str, type_: Any = None) -> BindParameter[Any]:
    """A value given at each execution (its type comes from the column it meets)."""
    return bindparam(name, type_=type_, required=False)


@dataclass(frozen=True)
class _Compiled:
    sql: str
    defaults: dict[str, Any]  # the constants compiled in as parameters (an IN list's items)
    args: frozenset[str]  # what each execution must give (every ``arg``)
    processors: dict[str, Callable[[Any], Any]]  # name -> the type's bind processor
    positions: tuple[str, ...] | None  # a positional paramstyle's order; None: named


class Prepared:
    """One statement, built by ``build`` on first use and compiled once per dialect."""

    def __init__(self, build: Callable[[], ClauseElement]) -> None:
        self._build = build
        self._stmt: ClauseElement | None = None
        self._by_dialect: dict[str, _Compiled] = {}

    @property
    def statement(self) -> ClauseElement:
        if self._stmt is None:
            self._stmt = self._build()
        return self._stmt

    def _compiled(self, dialect: Dialect) -> _Compiled:
        got = self._by_dialect.get(dialect.name)
        if got is None:
            c = cast(SQLCompiler, self.statement.compile(
                dialect=dialect, compile_kwargs={"render_postcompile": True}))
            procs: dict[str, Callable[[Any], Any]] = {}
            for bp, name in c.bind_names.items():
                proc = bp.type.dialect_impl(dialect).bind_processor(dialect)
                if proc is not None:
                    procs[name] = proc
            args = frozenset(k for k, v in c.params.items() if v is None)
            positions = tuple(c.positiontup) if c.positional and c.positiontup else None
            got = self._by_dialect[dialect.name] = _Compiled(
                c.string, {k: v for k, v in c.params.items() if v is not None}, args, procs,
                positions)
        return got

    def run(self, conn: Connection, params: Mapping[str, Any] | Sequence[Mapping[str, Any]]
            ) -> CursorResult[Any]:
        """Execute on ``conn`` (in its transaction) with ``params`` (a list: one execution
        each, sent as one batch)."""
        c = self._compiled(conn.dialect)
        if isinstance(params, Mapping):
            return conn.exec_driver_sql(c.sql, _bound(c, params))
        return conn.exec_driver_sql(c.sql, [_bound(c, p) for p in params])


def _bound(c: _Compiled, params: Mapping[str, Any]) -> Any:
    if not c.args <= params.keys():
        raise TypeError(f"prepared statement: missing value(s) for "
                        f"{', '.join(sorted(c.args - params.keys()))}: {c.sql}")
    values = {**c.defaults, **params}
    for name, proc in c.processors.items():
        if name in values:
            values[name] = proc(values[name])
    if c.positions is None:
        return values
    return tuple(values.get(k) for k in c.positions)
