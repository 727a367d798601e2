"""Vocabulary rule (docs/architecture.md, "Vocabularies"), checked on the source with ast like
the SQL-text rule of tests/test_architecture.py: a word of one of the contract's vocabularies
is spelled by its owner only, and everything else names it through the owner (a constant, a
builder, a table).

- gate positions ("G1".."G5"): contract/gate_positions.py, the table of positions;
- metric names ("val/ppl", "train/loss", a "probe/" prefix, ...): contract/metrics.py;
- run states ("succeeded", "running", ... as a whole string): contract/states.py;
- analysis defaults (a literal default of ``min_effect`` / ``tol`` / ``tolerance``):
  contract/analysis_defaults.py.

Docstrings and ``help=`` texts are exempt (they show users the words), as for SQL text, and so
are results_db/migrations (a migration records the schema of its revision, not today's words).
benchmarks/ is a user of the product, like sweeps/*.yaml, and is not checked.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.test_architecture import MODULES, ROOT, _docstring_ids, _help_ids, _text

PRODUCT = ("contract", "trainer", "results_db", "orchestrator", "dashboard")
EXEMPT = ("results_db.migrations",)

GATE_POSITION = re.compile(r"G[1-9]")
METRIC_NAME = re.compile(r"(train|val|probe|stability|params|cost|bench|longctx|data)/")
RUN_STATES = frozenset({"pending", "running", "succeeded", "failed", "diverged", "cancelled",
                        "lost"})
DEFAULT_NAMES = frozenset({"min_effect", "tol", "tolerance"})

# vocabulary -> its owner module
OWNERS = {"gate position": "contract.gate_positions", "metric name": "contract.metrics",
          "run state": "contract.states", "analysis default": "contract.analysis_defaults"}


def _kind(text: str) -> str | None:
    """Which vocabulary a string literal spells as a whole word, if any."""
    if GATE_POSITION.fullmatch(text):
        return "gate position"
    if METRIC_NAME.match(text):
        return "metric name"
    if text in RUN_STATES:
        return "run state"
    return None


def _number(node: ast.AST | None) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
        not isinstance(node.value, bool)


def _defaults(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, name) of every number given as an analysis default: a parameter default or a
    keyword argument named min_effect / tol / tolerance."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            pos = [*a.posonlyargs, *a.args]
            pairs = [*zip(pos[len(pos) - len(a.defaults):], a.defaults),
                     *zip(a.kwonlyargs, a.kw_defaults)]
            for arg, default in pairs:
                if arg.arg in DEFAULT_NAMES and _number(default):
                    yield node.lineno, arg.arg
        elif isinstance(node, ast.keyword) and node.arg in DEFAULT_NAMES and _number(node.value):
            yield node.value.lineno, node.arg


def violations_in(name: str, source: str, rel: str | Path) -> list[str]:
    """Every vocabulary word ``source`` (module ``name``) spells outside its owner."""
    tree = ast.parse(source, str(rel))
    exempt = _docstring_ids(tree) | _help_ids(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):  # f-string parts are checked as the whole string
            exempt.update(id(v) for v in node.values)
    for node in ast.walk(tree):
        text = _text(node)
        if text is None or id(node) in exempt:
            continue
        kind = _kind(text)
        if kind is not None and OWNERS[kind] != name:
            out.append(f"{rel}:{node.lineno}: {kind} {text[:40]!r} (owner: {OWNERS[kind]})")
    if name != OWNERS["analysis default"]:
        out += [f"{rel}:{line}: analysis default {arg}=<number> "
                f"(owner: {OWNERS['analysis default']})" for line, arg in _defaults(tree)]
    return out


def vocabulary_violations() -> list[str]:
    out = []
    for name, path in MODULES.items():
        if name.split(".")[0] not in PRODUCT or name.startswith(EXEMPT):
            continue
        out += violations_in(name, path.read_text(), path.relative_to(ROOT))
    return sorted(out)


def test_checker_flags_planted_literals() -> None:
    planted = '''"""Docstring: "G5" and "val/ppl" and "succeeded" are words for readers."""
import typer

POS = "G5"
NAME = f"probe/{'x'}/layer_{3}"
PREFIX = "bench/"


def leaderboard(sweep: str, metric: str = "val/ppl", min_effect: float = 0.01) -> None:
    """Ranked by "val/ppl"."""
    if status == "succeeded":
        stability(sweep, tol=0.05)


OPT = typer.Option("--metric", help="e.g. val/ppl, or runs that are 'running'")
HUMAN = "G5 after o_proj"  # a sentence, not the word
'''
    bad = violations_in("orchestrator.cli.planted", planted, "orchestrator/cli/planted.py")
    kinds = sorted(line.split(": ", 1)[1].split(" '")[0].split(" min")[0].split(" tol")[0]
                   for line in bad)
    assert kinds == ["analysis default", "analysis default", "gate position", "metric name",
                     "metric name", "metric name", "run state"], bad
    assert any(":4: gate position 'G5'" in b for b in bad)
    assert any(":11: run state 'succeeded'" in b for b in bad)
    # the owner may spell its own words
    assert violations_in("contract.gate_positions", 'P = "G5"\n', "x.py") == []
    assert violations_in("contract.metrics", 'P = "val/ppl"\n', "x.py") == []


def test_vocabularies_spelled_by_their_owners_only() -> None:
    bad = vocabulary_violations()
    assert not bad, "vocabulary outside its owner:\n" + "\n".join(bad)
