"""Imports inside functions only where they pay for themselves (docs/architecture.md, "Layout
and the import rule"): the imported module is expensive to import (LAZY_COST, measured),
optional (an extra that may not be installed), or a project module whose own top-level imports
pull one of those in that the importing module does not already load at its top. Anything else
is imported at the top of the module, where a reader sees a module's dependencies at once.
Checked on the source with ast; no import executed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from tests.test_architecture import MODULES, ROOT, _type_checking_nodes

# Seconds to `python -c "import X"` minus a bare interpreter start, best of 3, on the 2-core
# CPU VM (load 0.4), 2026-12-03. A command that never needs the module does not pay it (the CLI's
# `validate` never starts Ray; `import results_db` never loads scipy). Threshold: 0.05 s.
LAZY_COST = {"torch": 2.2, "deepspeed": 2.4, "ray": 0.8, "scipy": 0.3, "polars": 0.24,
             "numpy": 0.12, "alembic": 0.46, "altair": 0.36, "streamlit": 0.36, "pyarrow": 0.11,
             "sqlalchemy": 0.25, "typer": 0.07, "pydantic": 0.05}
# Optional dependencies (extras, or packages a feature brings): importing them at the top
# would make the whole module fail where they are not installed.
OPTIONAL = ("lm_eval", "psycopg", "datasets", "playwright", "click", "vl_convert")
PROJECT = ("contract", "trainer", "results_db", "orchestrator", "dashboard")


def _top(name: str) -> str:
    return name.split(".")[0]


def _probes(tree: ast.AST) -> set[int]:
    """ids of imports inside ``try: ... except ImportError``: they ask whether a package is
    installed (and say what needs it), which only works where the import runs."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                h.type is not None and "ImportError" in ast.unparse(h.type) for h in node.handlers):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _function_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    skip = _type_checking_nodes(tree) | _probes(tree)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip:
                    yield node


def _names(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """Full module names an import statement loads (``from pkg import mod`` -> pkg.mod)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        parts = name.split(".")
        keep = len(parts) - node.level + (1 if MODULES[name].name == "__init__.py" else 0)
        base = ".".join(parts[:keep] + ([base] if base else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


@cache
def _tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"))


@cache
def _direct(name: str) -> frozenset[str]:
    """What the module-level statements of ``name`` import (under if/try too, not
    TYPE_CHECKING), plus its parent packages (importing a.b.c runs a and a.b first)."""
    out: set[str] = set()
    tree = _tree(name)
    skip = _type_checking_nodes(tree)
    stack = [n for n in tree.body if id(n) not in skip]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(m if m in MODULES else _top(m) for m in _names(name, node))
        elif isinstance(node, (ast.If, ast.Try)):
            stack += [n for n in ast.iter_child_nodes(node)
                      if isinstance(n, ast.stmt) and id(n) not in skip]
    parts = name.split(".")
    out.update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES)
    return frozenset(out)


@cache
def top_level_closure(name: str) -> frozenset[str]:
    """Every module (project modules, third-party top names) that importing ``name`` loads."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        for mod in _direct(stack.pop()):
            if mod not in seen:
                seen.add(mod)
                if mod in MODULES:
                    stack.append(mod)
    return frozenset(seen)


def _costly(mods: frozenset[str]) -> set[str]:
    return {m for m in mods if m in LAZY_COST or m in OPTIONAL}


def unjustified(name: str) -> list[str]:
    out = []
    have = _costly(top_level_closure(name))
    for node in _function_imports(_tree(name)):
        for mod in _names(name, node):
            if _top(mod) in LAZY_COST or _top(mod) in OPTIONAL:
                continue
            if mod in MODULES and _costly(top_level_closure(mod) | {mod}) - have:
                continue
            where = MODULES[name]
            shown = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
            out.append(f"{shown}:{node.lineno}: {mod}")
    return out


def test_function_level_imports_pay_for_themselves() -> None:
    bad = [v for name in MODULES if _top(name) in PROJECT for v in unjustified(name)]
    assert not bad, ("imports inside functions that cost nothing to load at the top "
                     f"({len(bad)}):\n" + "\n".join(bad))


def test_checker_flags_a_free_lazy_import_and_spares_a_costly_one(tmp_path: Path) -> None:
    """Planted modules: a function importing json (free) is flagged; one importing torch, or a
    project module that loads torch, is not; a module already loading torch at its top may not
    defer another torch user."""
    files = {
        "dashboard.zz_heavy": "import torch\n",
        "dashboard.zz_light": "import json\n",
        "dashboard.zz_user": ("def f():\n    import json\n    import torch\n"
                              "    from dashboard import zz_heavy, zz_light\n"),
        "dashboard.zz_torchy": "import torch\n\ndef g():\n    from dashboard import zz_heavy\n",
    }
    for name, text in files.items():
        path = tmp_path / f"{name.split('.')[-1]}.py"
        path.write_text(text)
        MODULES[name] = path
    try:
        flagged = [v.split(": ")[-1] for v in unjustified("dashboard.zz_user")]
        torchy = [v.split(": ")[-1] for v in unjustified("dashboard.zz_torchy")]
    finally:
        for name in files:
            del MODULES[name]
    assert flagged == ["json", "dashboard.zz_light"]
    assert torchy == ["dashboard.zz_heavy"]
