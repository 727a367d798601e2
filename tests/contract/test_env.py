"""contract/env.py: every GATESWEEP_* knob is a row of one table, read through one reader that
refuses what has no meaning (text for a flag, a non-ASCII digit, 1e308 past the bound) in one
line naming the variable, the value and what was expected, before a command writes anything;
the docs' table is the module's, and no name is documented but unread or read but undocumented.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from contract import env
from orchestrator.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("contract", "trainer", "results_db", "orchestrator", "dashboard")
DOC = ROOT / "docs" / "cluster.md"
NAME = re.compile(r"GATESWEEP_[A-Z0-9_]*[A-Z0-9]")
READERS = {"flag", "seconds", "seconds_or_none", "text"}
ARABIC_TEN = "\u0661\u0660"  # "١٠": float() reads it as 10.0

BAD = [  # (variable, value, what the line says was expected)
    ("GATESWEEP_REUSE_ACTORS", "abc", "1 or 0"),
    ("GATESWEEP_TUNE_FILES", "2", "1 or 0"),
    ("GATESWEEP_RETRY_CODE_ERRORS", "maybe", "1 or 0"),
    ("GATESWEEP_KEEP_RAY_TMP", "keep", "1 or 0"),
    ("GATESWEEP_STALE_AFTER", "1e308", "<= 1e9"),
    ("GATESWEEP_STALE_AFTER", ARABIC_TEN, "ASCII digits"),
    ("GATESWEEP_STALE_AFTER", "-5", ">= 0"),
    ("GATESWEEP_DB_WAIT_S", "nan", ">= 0"),
    ("GATESWEEP_DB_WAIT_S", "1_0", "ASCII digits"),
    ("GATESWEEP_DB_WAIT_S", " 5", "ASCII digits"),
    ("GATESWEEP_HEARTBEAT_S", "0", "> 0"),
    ("GATESWEEP_FLUSH_S", "inf", "> 0"),
    ("GATESWEEP_MAX_SILENT_S", "1e10", "<= 1e9"),
]


@pytest.mark.parametrize(("name", "value", "expected"), BAD)
def test_a_bad_knob_is_one_line_before_anything_is_written(
        name: str, value: str, expected: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, value)
    db = tmp_path / "new.db"
    assert main(["db", "upgrade", "--db", str(db)]) == 2  # a command that would create a DB
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1, cap
    assert f"{name}={value!r}" in cap.err and expected in cap.err, cap.err
    assert not db.exists()


def test_good_values_are_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw, value in [("0", 0.0), ("2.5", 2.5), (".5", 0.5), ("3.", 3.0), ("+4", 4.0),
                       ("1e3", 1000.0), ("1E9", 1e9)]:
        monkeypatch.setenv("GATESWEEP_DB_WAIT_S", raw)
        assert env.seconds("GATESWEEP_DB_WAIT_S") == value, raw
    for raw, on in [("1", True), ("TRUE", True), ("yes", True), ("On", True), ("0", False),
                    ("false", False), ("NO", False), ("off", False)]:
        monkeypatch.setenv("GATESWEEP_TUNE_FILES", raw)
        assert env.flag("GATESWEEP_TUNE_FILES") is on, raw
    monkeypatch.setenv("GATESWEEP_JOB_PYTHON", "/opt/py/bin/python3")
    assert env.text("GATESWEEP_JOB_PYTHON") == "/opt/py/bin/python3"


def test_unset_or_empty_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GATESWEEP_REUSE_ACTORS", "GATESWEEP_DB_WAIT_S", "GATESWEEP_STALE_AFTER"):
        monkeypatch.delenv(name, raising=False)
    assert env.flag("GATESWEEP_REUSE_ACTORS") is True
    assert env.seconds("GATESWEEP_DB_WAIT_S") == 300.0
    assert env.seconds_or_none("GATESWEEP_STALE_AFTER") is None
    monkeypatch.setenv("GATESWEEP_REUSE_ACTORS", "")
    monkeypatch.setenv("GATESWEEP_STALE_AFTER", "")
    assert env.flag("GATESWEEP_REUSE_ACTORS") is True
    assert env.seconds_or_none("GATESWEEP_STALE_AFTER") is None


def test_a_name_outside_the_table_or_read_as_another_kind_is_refused() -> None:
    with pytest.raises(KeyError):
        env.flag("GATESWEEP_NOT_A_KNOB")
    with pytest.raises(TypeError):
        env.seconds("GATESWEEP_TUNE_FILES")


@pytest.mark.parametrize("value", ["1e9", "1000000001"])
def test_stale_after_has_one_bound_for_the_option_and_the_variable(
        value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """1e9 passes both (then: no DB), 1e9 + 1 is refused by both."""
    db = str(tmp_path / "none.db")
    monkeypatch.setenv("GATESWEEP_STALE_AFTER", value)
    from_env = main(["status", "--db", db]), capsys.readouterr().err
    monkeypatch.delenv("GATESWEEP_STALE_AFTER")
    from_option = main(["status", "--db", db, f"--stale-after={value}"]), capsys.readouterr().err
    within = value == "1e9"
    for code, err in (from_env, from_option):
        assert code == 2, err
        assert (("1e9" in err or "1000000000" in err) and "none.db" not in err) is not within, err


def test_the_docs_table_is_the_modules() -> None:
    text = DOC.read_text()
    start = text.index("<!-- generated from contract/env.py")
    body = text[text.index("\n", start) + 1:text.index("<!-- end of generated table -->")]
    assert body == env.markdown_table(), "regenerate docs/cluster.md section 11 from env"


def _named_in_product_and_docs() -> dict[str, set[str]]:
    """GATESWEEP_* name -> the files that spell it (product code, deploy/, README, docs)."""
    files = [p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py")]
    files += [p for p in (ROOT / "deploy").rglob("*") if p.is_file()]
    files += [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    found: dict[str, set[str]] = {}
    for path in files:
        for name in NAME.findall(path.read_text(errors="replace")):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_name_in_code_and_docs_is_a_row() -> None:
    unknown = {n: sorted(f) for n, f in _named_in_product_and_docs().items()
               if n not in env.KNOBS}
    assert not unknown, f"GATESWEEP_* names outside contract/env.py's TABLE: {unknown}"


def _consts(tree: ast.AST) -> dict[str, str]:
    """Module-level string constants: ``DB_WAIT_ENV = "GATESWEEP_DB_WAIT_S"``."""
    return {t.id: n.value.value for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            for t in n.targets if isinstance(t, ast.Name)}


def _name(arg: ast.expr, consts: dict[str, str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return consts.get(arg.id) if isinstance(arg, ast.Name) else None


def _reads(tree: ast.AST) -> Iterator[str]:
    """Names passed to contract.env's readers, literally or through a module constant."""
    consts = _consts(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and ast.unparse(node.func.value) == "env" and node.func.attr in READERS
                and node.args and (name := _name(node.args[0], consts))):
            yield name


def _raw_reads(tree: ast.AST) -> Iterator[int]:
    """Lines that read a GATESWEEP_* variable past the table: os.environ.get / [] / getenv."""
    consts = _consts(tree)
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args and ast.unparse(node.func) in (
                "os.environ.get", "environ.get", "os.getenv", "getenv"):
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and ast.unparse(node.value) in ("os.environ", "environ"):
            key = node.slice
        if key is not None and (_name(key, consts) or "").startswith("GATESWEEP_"):
            yield node.lineno


def test_the_raw_read_rule_flags_a_planted_read() -> None:
    planted = ast.parse('import os\nDB_ENV = "GATESWEEP_DB"\nos.environ.get("GATESWEEP_X", "1")\n'
                        'os.environ[DB_ENV]\nos.getenv("GATESWEEP_Y")\nenv.flag("GATESWEEP_Z")\n')
    assert list(_raw_reads(planted)) == [3, 4, 5]
    assert list(_reads(planted)) == ["GATESWEEP_Z"]


def test_every_row_is_read_and_only_through_the_table() -> None:
    read: set[str] = set()
    raw: list[str] = []
    for pkg in PRODUCT:
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text())
            read |= set(_reads(tree))
            raw += [f"{path.relative_to(ROOT)}:{line}" for line in _raw_reads(tree)]
    assert not raw, f"GATESWEEP_* read past contract/env.py: {raw}"
    script = (ROOT / env.JOB_SCRIPT).read_text()
    read |= {k.name for k in env.TABLE if "${" + k.name in script}
    assert set(env.KNOBS) == read, f"rows nobody reads: {set(env.KNOBS) - read}; " \
                                   f"reads of no row: {read - set(env.KNOBS)}"
