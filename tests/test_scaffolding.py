"""Test scaffolding stays out of the product packages (issue 19): synthetic-DB builders, the
load generator, the throwaway PostgreSQL server and fault injectors live in tests/support/,
and no product module reads a test-only switch (the disk-full injector used to run on every
writer transaction, behind $GATESWEEP_TEST_DB_FULL)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("contract", "trainer", "results_db", "orchestrator", "dashboard")
MOVED = ("results_db/synth.py", "results_db/loadgen.py", "results_db/pgtemp.py",
         "dashboard/sample.py")


def test_scaffolding_modules_live_in_tests_support() -> None:
    assert not [m for m in MOVED if (ROOT / m).exists()]
    for name in ("synth", "loadgen", "pgtemp", "dashboard_sample", "dbfaults"):
        assert (ROOT / "tests" / "support" / f"{name}.py").is_file(), name


def test_no_product_module_reads_a_test_switch() -> None:
    found = []
    for pkg in PRODUCT:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(ROOT)}:{n.lineno}: {n.value}" for n in ast.walk(tree)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)
                      and n.value.startswith("GATESWEEP_TEST")]
            found += [f"{path.relative_to(ROOT)}:{n.lineno}: import {n.module}"
                      for n in ast.walk(tree)
                      if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tests")]
    assert not found, found
