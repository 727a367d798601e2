"""Architecture rules (docs/architecture.md, "Layout and the import rule"), checked on the
source with ast -- no imports executed:

(a) results_db is the only package that speaks SQL: outside it no module imports sqlalchemy,
    a DB driver or results_db.schema.tables / results_db.migrations, no string literal is SQL
    statement text (upper-case SELECT ... FROM, INSERT INTO, UPDATE .. SET, DELETE FROM,
    CREATE/DROP/ALTER TABLE|VIEW|INDEX, PRAGMA; docstrings and ``help=`` texts, which show
    users `orchestrator query` examples, are not code), and no ``.query(...)`` /
    ``.execute(...)`` call is handed a literal or built string (hand-built SQL sent through
    the user query door, whatever its case).
(b) No import cycles among the project's modules, function-level imports included (only
    ``if TYPE_CHECKING:`` imports are left out: they never run). Strongly connected
    components of the import graph (Tarjan) of size > 1 are cycles.
(c) Layers (docs/architecture.md): contract < trainer | results_db < orchestrator < dashboard.
    A package imports only packages on lower floors (and third-party code); trainer and
    results_db are siblings that never import each other; contract imports no project package
    and no torch. benchmarks/ sits above everything.
(d) Rooms inside a package (ROOMS), by the same rule: orchestrator/ sweep < run < cli (its
    top-level modules, ``__main__``, above them); orchestrator/run/ cluster, env < health <
    trial < driver; results_db/ dberrors < schema < engine, rows, sqlread, analysis's rules <
    write < read < analysis/api.py < db.py (each package's __init__ says why). The dashboard enters
    the orchestrator only through DASHBOARD_DOORS: the rerun path (its one write), the frame
    formatter its downloads share with the CLI, and the sweep-file reader (the Decide page reads a
    stored sweep's ``decide:`` block as `status` does).
(e) Every package's __init__ docstring names exactly its modules (``name.py``) and folders of
    code (``name/``): a new module is listed where a reader looks first.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contract", "orchestrator", "trainer", "results_db", "dashboard", "benchmarks")
# Floor of each package; an import may only go to a strictly lower floor (or within a package).
FLOORS = {"contract": 0, "trainer": 1, "results_db": 1, "orchestrator": 2, "dashboard": 3,
          "benchmarks": 4}
# Floors of the rooms inside a package (a subpackage or a module, by its dotted name under the
# package; the longest key wins); a module under no key (``__main__``) and the package's front
# door (its __init__) are above them all. Keys on one floor never import each other.
ROOMS = {
    "orchestrator": {"sweep": 0, "run": 1, "cli": 2},
    "orchestrator.run": {"cluster": 0, "env": 0, "health": 1, "trial": 2, "driver": 3},
    # analysis/'s pure rules sit low (the write and read rooms use them); its api.py is the
    # AnalysisMixin, which reads through read/frames.py.
    "results_db": {"dberrors": 0, "schema": 1, "engine": 2, "rows": 2, "sqlread": 2,
                   "analysis": 2, "migrations": 2, "write": 3, "read": 4, "analysis.api": 5,
                   "db": 6},
}
DASHBOARD_DOORS = ("orchestrator.run.driver.rerun", "orchestrator.cli.frame_format",
                   "orchestrator.sweep.spec")
SQL_OWNER = "results_db"
FORBIDDEN_IMPORTS = ("sqlalchemy", "alembic", "psycopg", "sqlite3", "results_db.schema.tables",
                     "results_db.migrations", "results_db.sqlread", "results_db.read.frames")
SQL_TEXT = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b|"
    r"\b(CREATE|DROP|ALTER)\s+(TABLE|VIEW|INDEX)\b|\bPRAGMA\s+\w+")
SQL_CALLS = ("query", "execute", "executescript", "exec_driver_sql")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def _imports(name: str, tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported module name, line) for every import that runs, at any level."""
    skip = _type_checking_nodes(tree)
    is_pkg = MODULES[name].name == "__init__.py"
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_pkg else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                yield (full if full in MODULES else base), node.lineno


def _docstring_ids(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _help_ids(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in ("help", "epilog", "description"):
            out.update(id(n) for n in ast.walk(node.value))
    return out


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else " x "
                       for v in node.values)
    return None


def _is_built_string(node: ast.AST) -> bool:
    if _text(node) is not None:
        return True
    if isinstance(node, ast.BinOp):
        return _is_built_string(node.left) or _is_built_string(node.right)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
        node.func.attr == "format" and _text(node.func.value) is not None


def sql_violations() -> list[str]:
    out = []
    for name, path in MODULES.items():
        if name == SQL_OWNER or name.startswith(SQL_OWNER + "."):
            continue
        rel = path.relative_to(ROOT)
        tree = ast.parse(path.read_text(), str(path))
        for mod, line in _imports(name, tree):
            if any(mod == f or mod.startswith(f + ".") for f in FORBIDDEN_IMPORTS):
                out.append(f"{rel}:{line}: imports {mod}")
        exempt = _docstring_ids(tree) | _help_ids(tree)
        inner: set[int] = set()  # f-string parts are checked as the whole f-string
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                inner.update(id(v) for v in node.values)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in SQL_CALLS and node.args and \
                    _is_built_string(node.args[0]):
                out.append(f"{rel}:{node.lineno}: .{node.func.attr}() of a hand-built string")
        for node in ast.walk(tree):
            text = _text(node)
            if text is None or id(node) in exempt or id(node) in inner:
                continue
            if SQL_TEXT.search(text):
                out.append(f"{rel}:{node.lineno}: SQL text {text.strip()[:50]!r}")
    return sorted(set(out))


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for mod, _ in _imports(name, tree):
            while mod and mod not in MODULES:  # `import a.b.c` of a non-module attribute
                mod = mod.rpartition(".")[0]
            if mod and mod != name:
                graph[name].add(mod)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def test_cycle_finder_finds_function_level_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("def f():\n    from results_db.read import query\n"
                     "if TYPE_CHECKING:\n    import dashboard.app\n")
    MODULES.setdefault("x_probe", ROOT / "x_probe.py")
    try:
        assert [m for m, _ in _imports("x_probe", tree)] == ["results_db.read.query"]
    finally:
        MODULES.pop("x_probe")


def test_sql_text_detector() -> None:
    assert SQL_TEXT.search("SELECT m.name FROM metrics m")
    assert SQL_TEXT.search("DELETE FROM runs") and SQL_TEXT.search("UPDATE runs SET x = 1")
    for prose in ("df.select('a').filter(b)", "Select the runs from the DB",
                  "runs to update", "pick a variant FROM the list"):
        assert not SQL_TEXT.search(prose)


def test_only_results_db_speaks_sql() -> None:
    bad = sql_violations()
    assert not bad, "SQL outside results_db:\n" + "\n".join(bad)


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_analysis_is_pure() -> None:
    """results_db/analysis/ decides what results mean over polars frames: no SQL, no torch.
    Only api.py (the ResultsDB mixin) reaches the reads (results_db.read.frames)."""
    bad = []
    allowed = ("results_db.analysis", "results_db.schema.vocab", "contract.states")
    for name, path in MODULES.items():
        if not name.startswith("results_db.analysis"):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for mod, line in _imports(name, tree):
            ok_db = mod.startswith(allowed) or (name.endswith(".api") and
                                                mod == "results_db.read.frames")
            if mod.split(".")[0] in ("sqlalchemy", "torch", "trainer") or \
                    (mod.startswith("results_db") and not ok_db):
                bad.append(f"{path.relative_to(ROOT)}:{line}: imports {mod}")
        exempt = _docstring_ids(tree)
        bad += [f"{path.relative_to(ROOT)}:{n.lineno}: SQL text" for n in ast.walk(tree)
                if id(n) not in exempt and (t := _text(n)) is not None and SQL_TEXT.search(t)]
    assert not bad, "\n".join(bad)


def _room(package: str, module: str) -> str | None:
    """The key of ``ROOMS[package]`` that ``module`` lives under; None: the front door or no
    room (both above every room)."""
    rest = module[len(package) + 1:] if module.startswith(package + ".") else ""
    keys = [k for k in ROOMS[package] if rest == k or rest.startswith(k + ".")]
    return max(keys, key=len) if keys else None


def _room_floor(package: str, key: str | None) -> int:
    floors = ROOMS[package]
    return floors[key] if key is not None else max(floors.values()) + 1


def room_violation(name: str, dep: str) -> str | None:
    """Why ``name`` may not import ``dep`` by the rooms of a package holding both (or None)."""
    for package in ROOMS:
        if not name.startswith(package + ".") or \
                not (dep == package or dep.startswith(package + ".")):
            continue
        mine, theirs = _room(package, name), _room(package, dep)
        if mine != theirs and _room_floor(package, theirs) >= _room_floor(package, mine):
            return (f"room floor {_room_floor(package, mine)} -> "
                    f"{_room_floor(package, theirs)} in {package}")
    return None


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for name, deps in graph.items():
        top = name.split(".")[0]
        for dep in deps:
            other = dep.split(".")[0]
            where = f"{MODULES[name].relative_to(ROOT)}: {name} imports {dep}"
            if other != top and FLOORS[other] >= FLOORS[top]:
                out.append(f"{where} (floor {FLOORS[top]} -> {FLOORS[other]})")
            elif other == top and (why := room_violation(name, dep)):
                out.append(f"{where} ({why})")
            elif top == "dashboard" and other == "orchestrator" and dep not in DASHBOARD_DOORS:
                out.append(f"{where} (the dashboard's doors are {', '.join(DASHBOARD_DOORS)})")
    return sorted(out)


def _planted_violations(graph: dict[str, set[str]]) -> list[str]:
    """layer_violations over a planted graph whose modules are registered only meanwhile."""
    saved = dict(MODULES)
    MODULES.update({m: ROOT / (m.replace(".", "/") + ".py") for m in graph})
    try:
        return layer_violations(graph)
    finally:
        MODULES.clear()
        MODULES.update(saved)


def test_layer_checker_flags_sideways_and_upward_imports() -> None:
    graph = {"trainer.a": {"results_db.b", "contract.c"}, "contract.c": {"trainer.a"},
             "dashboard.d": {"orchestrator.run.driver.rerun", "results_db.b"}, "results_db.b":
             set(), "orchestrator.run.driver.rerun": set()}
    bad = _planted_violations(graph)
    assert len(bad) == 2 and "trainer.a imports results_db.b" in bad[1] and \
        "contract.c imports trainer.a" in bad[0]


def test_layer_checker_flags_rooms_and_dashboard_doors() -> None:
    graph = {"orchestrator.run.a": {"orchestrator.cli.b", "orchestrator.sweep.c"},
             "orchestrator.sweep.c": {"orchestrator.run.a"},
             "orchestrator.cli.b": {"orchestrator.run.a"},
             "dashboard.d": {"orchestrator.run.a", "orchestrator.run.driver.rerun"},
             "orchestrator.run.driver.rerun": set()}
    bad = _planted_violations(graph)
    assert len(bad) == 3, bad
    assert "dashboard.d imports orchestrator.run.a" in bad[0]
    assert "orchestrator.run.a imports orchestrator.cli.b" in bad[1]
    assert "orchestrator.sweep.c imports orchestrator.run.a" in bad[2]


def test_layer_checker_flags_rooms_inside_rooms() -> None:
    graph = {"orchestrator.run.health.a": {"orchestrator.run.trial.b", "orchestrator.run.env"},
             "orchestrator.run.trial.b": {"orchestrator.run.health.a", "orchestrator.run"},
             "orchestrator.run.env": set(), "orchestrator.run": set(),
             "results_db.write.c": {"results_db.read.d", "results_db.analysis.e"},
             "results_db.read.d": {"results_db.write.c", "results_db.analysis.api"},
             "results_db.analysis.e": {"results_db.sqlread"}, "results_db.sqlread": set(),
             "results_db.analysis.api": {"results_db.read.d", "results_db.analysis.e"}}
    bad = _planted_violations(graph)
    assert len(bad) == 5, bad
    assert "health.a imports orchestrator.run.trial.b" in bad[0]
    assert "trial.b imports orchestrator.run (" in bad[1]
    assert "analysis.e imports results_db.sqlread" in bad[2]
    assert "read.d imports results_db.analysis.api" in bad[3]
    assert "write.c imports results_db.read.d" in bad[4]


def test_layers() -> None:
    bad = layer_violations(import_graph())
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


def test_contract_is_torch_free() -> None:
    bad = [f"{MODULES[n].relative_to(ROOT)}:{line}: imports {mod}"
           for n in MODULES if n.split(".")[0] == "contract"
           for mod, line in _imports(n, ast.parse(MODULES[n].read_text()))
           if mod.split(".")[0] in ("torch", "deepspeed", "ray", "sqlalchemy", "polars", "numpy")]
    assert not bad, "\n".join(bad)


PRODUCT = ("contract", "orchestrator", "trainer", "results_db", "dashboard")
NAMED_MODULE = re.compile(r"(?<![\w/.])(\w+)\.py\b")  # ``name.py``, not ``other/name.py``
NAMED_FOLDER = re.compile(r"(?<![\w/.])(\w+)/(?!\w)")  # ``name/``, not ``a/b`` or ``and/or``


def docstring_drift(init: Path, root: Path = ROOT) -> list[str]:
    """What a package's __init__ docstring leaves out of its folder (modules ``name.py``,
    folders of code ``name/``) or names that is not there."""
    here = init.parent
    have = {p.name for p in here.glob("*.py") if p.name != "__init__.py"} | \
        {f"{d.name}/" for d in here.iterdir() if d.is_dir() and any(d.rglob("*.py"))}
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    named = {f"{m}.py" for m in NAMED_MODULE.findall(doc)} | \
        {f"{d}/" for d in NAMED_FOLDER.findall(doc)}
    rel = init.relative_to(root)
    return [f"{rel}: does not name {n}" for n in sorted(have - named)] + \
        [f"{rel}: names {n}, which is not there" for n in sorted(named - have)]


def test_docstring_drift_checker_flags_missing_and_extra(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "room").mkdir(parents=True)
    (pkg / "room" / "a.py").write_text("")
    for name in ("kept.py", "left_out.py"):
        (pkg / name).write_text("")
    (pkg / "__init__.py").write_text('"""\n  kept.py   x\n  gone.py   y (and/or z: '
                                     'other/left_out.py)\n  room/     w\n"""\n')
    assert docstring_drift(pkg / "__init__.py", tmp_path) == [
        "pkg/__init__.py: does not name left_out.py",
        "pkg/__init__.py: names gone.py, which is not there"]


def test_every_package_docstring_names_exactly_its_modules() -> None:
    bad = [line for pkg in PRODUCT for init in sorted((ROOT / pkg).rglob("__init__.py"))
           for line in docstring_drift(init)]
    assert not bad, "package docstrings out of step with their folders:\n" + "\n".join(bad)
