"""Every `orchestrator ...` command shown in a code block of README.md or docs/*.md runs as
printed, against the sample DB (tests/sample_db.py) through `--db`.

Skipped, and why: commands that train, serve or need a cluster --
`submit` (runs Ray trials; it is run with `--dry-run` instead, which is read-only, unless it
uses `--detach`, which needs a Ray cluster), `rerun` and `evaluate` (train / load checkpoints),
`dashboard` (serves until killed), `cancel` (changes runs; covered by
tests/orchestrator/test_cli.py).
docs/cluster.md's `validate`/`submit` name cluster data paths (/shared/...), so they run with
`--no-data` here (the data check itself is tested in tests/orchestrator/test_malformed_input.py).
Placeholders in the docs (a run id such as 7, the sweep of a real run) resolve against the
sample DB, which holds the shipped sweeps gates-toy and lr-stability; a command about
sweeps/nsa.yaml's sweep reads a synthetic 2x2 registered under its name
(tests/support/factorial_db.py).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import results_db
from orchestrator.cli.main import main
from tests import sample_db
from tests.support import factorial_db

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = {"rerun": "trains", "evaluate": "loads a checkpoint and evaluates",
        "dashboard": "serves until killed", "cancel": "changes run states"}
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
NSA_SWEEP = "nsa-gate-vs-sparsity"  # sweeps/nsa.yaml's name: not in the sample DB


def doc_commands() -> list[tuple[str, list[str]]]:
    """(where, argv) of each `orchestrator` command in a fenced code block; a command may
    continue over lines (a trailing backslash, or an open quote)."""
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in FENCE.findall(text):
            lines = block.splitlines()
            i = 0
            while i < len(lines):
                line = lines[i].strip()
                i += 1
                if not re.match(r"^(\$ )?(\.venv/bin/)?orchestrator\s", line):
                    continue
                cmd = line
                while i < len(lines) and (cmd.endswith("\\") or not _complete(cmd)):
                    cmd = cmd.rstrip("\\") + " " + lines[i].strip()
                    i += 1
                argv = shlex.split(cmd, comments=True)
                if doc.name == "cluster.md" and argv[1] in ("validate", "submit"):
                    argv.append("--no-data")  # its data lives on the cluster's file system
                found.append((f"{doc.name}: {cmd[:60]}", argv[1:]))
    return found


def _complete(cmd: str) -> bool:
    try:
        shlex.split(cmd, comments=True)
        return True
    except ValueError:  # an open quote: the command continues on the next line
        return False


def _runnable(argv: list[str], url: str) -> list[str] | None:
    """The argv to run (with --db pointing at the sample DB), or None when skipped."""
    if not argv or argv[0] in SKIP or (argv[0] == "submit" and "--detach" in argv):
        return None
    out, skip_next = [], False
    for a in argv:
        if skip_next:
            skip_next = False
            continue
        if a in ("--db", "--address", "--storage"):
            skip_next = True  # the docs' own DB / cluster: replaced by the sample DB
            continue
        out.append(a)
    if out[0] == "submit":
        out.append("--dry-run")
    return [*out, "--db", url]


COMMANDS = doc_commands()


def test_the_docs_show_commands() -> None:
    names = {argv[0] for _, argv in COMMANDS}
    assert {"validate", "submit", "status", "runs", "show", "query", "leaderboard"} <= names


@pytest.mark.parametrize("where,argv", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_doc_command_runs_as_printed(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                     where: str, argv: list[str]) -> None:
    url = sample_db.copy_to(tmp_path)
    run = _runnable(argv, url)
    if run is None:
        pytest.skip(f"{argv[0]}: {SKIP.get(argv[0], 'needs a Ray cluster')}")
    if NSA_SWEEP in run:
        db = results_db.open(url)
        factorial_db.build(db, sweep=NSA_SWEEP)
        db.close()
    if run[0] == "report" and "--out" not in run:  # its default file goes to the cwd: the repo
        run += ["--out", str(tmp_path / "report.html")]
    code = main(run)
    out, err = capsys.readouterr()
    assert code == 0, f"{where}: exit {code}\n{err[-2000:]}"
    assert out.strip(), f"{where}: printed nothing"
