"""The type check and the lint: mypy over the product packages, with pyproject.toml's [tool.mypy]
settings (every function annotated), and ruff over the whole tree find zero errors. The
hand-offs between packages (RunSpec, RunRow, Plan, TrialResult, ...) are annotated with real
types; this test is what makes those annotations true."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.tokenizer import cache_root

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contract", "trainer", "results_db", "orchestrator", "dashboard")


def require(tool: str) -> None:
    """Fail, never skip, where a check's tool is missing: a skipped check looks like a pass."""
    if importlib.util.find_spec(tool) is None:
        pytest.fail(f"{tool} is not installed: it is in the dev extra, which `make setup` "
                    "installs (pip install -e '.[dev]')", pytrace=False)


def test_require_fails_for_a_missing_tool() -> None:
    with pytest.raises(pytest.fail.Exception, match="no_such_tool is not installed"):
        require("no_such_tool")


def test_mypy_finds_no_errors() -> None:
    require("mypy")
    # The config's own `files` list is the product packages. The cache lives in the project's
    # cache dir, not the checkout, as DeepSpeed's compiled ops do: a fresh clone checks in ~1 s
    # instead of ~45 s (40 CPU-s on 2 cores). mypy keys each module's entry on its source hash
    # and the options, so what changed is checked again and the verdict is a full check's.
    res = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "pyproject.toml",
                          "--cache-dir", str(cache_root() / "mypy")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    errors = [line for line in res.stdout.splitlines() if ": error:" in line]
    assert res.returncode == 0 and not errors, (
        f"mypy: {len(errors)} error(s) (exit {res.returncode}):\n" + "\n".join(errors[:60])
        + res.stderr[-2000:])


def test_ruff_finds_nothing() -> None:
    """Lint and import order over the whole tree, with pyproject.toml's [tool.ruff] rules."""
    require("ruff")
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format",
                          "concise", "."], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"ruff:\n{res.stdout[-4000:]}{res.stderr[-2000:]}"


def test_mypy_config_covers_every_product_package() -> None:
    """A package left out of `files` would silently go unchecked."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert tuple(cfg["files"]) == PACKAGES
    found = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file() and p.name != "tests"}
    assert found == set(PACKAGES), f"top-level packages {sorted(found)} vs checked {PACKAGES}"
