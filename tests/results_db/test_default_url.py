"""The default results DB has one owner (results_db.default_url): $GATESWEEP_DB, else
sqlite:///results.db, an empty variable counting as unset. It was spelled in four places, and
tests/support/screenshot.py read an empty $GATESWEEP_DB as the URL "" while the CLI and the app
fell back to the default."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.app import db_url as cli_db_url
from orchestrator.run.env import absolute_db_url

ROOT = Path(__file__).resolve().parents[2]
OWNER = ROOT / "results_db" / "engine.py"


@pytest.mark.parametrize("env", [None, "", "sqlite:///elsewhere.db"])
def test_every_entry_point_resolves_the_same_default(monkeypatch: pytest.MonkeyPatch,
                                                     env: str | None) -> None:
    if env is None:
        monkeypatch.delenv("GATESWEEP_DB", raising=False)
    else:
        monkeypatch.setenv("GATESWEEP_DB", env)
    want = env or "sqlite:///results.db"
    assert results_db.default_url() == want
    assert cli_db_url(None) == absolute_db_url(want)
    assert results_db.resolve_url(None) == results_db.resolve_url(want)


def _code_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants that are code, not docstrings or help= texts."""
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)}
    helps = {id(k.value) for n in ast.walk(tree) if isinstance(n, ast.Call)
             for k in n.keywords if k.arg == "help"}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs and id(n) not in helps]


def test_only_results_db_spells_the_default_url() -> None:
    found = []
    for pkg in ("contract", "trainer", "results_db", "orchestrator", "dashboard", "benchmarks"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path == OWNER:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(ROOT)}:{line}" for line, text in _code_strings(tree)
                      if text == "sqlite:///results.db"]
    assert not found, f"the default DB URL is results_db.default_url()'s; also spelled at {found}"
