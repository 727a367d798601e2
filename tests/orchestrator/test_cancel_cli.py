"""``orchestrator cancel RUN...``: what the DB holds afterwards, and how a run is referred to.

A run is named by its id (ASCII digits, leading zeros allowed: ``0002`` is id 2) or its name.
Digits that are one run's id and another run's name are refused as ambiguous, whatever their
spelling: ``cancel 0002`` with a run *named* ``0002`` used to cancel run 2 (found by id, then
taken for a lookup by name because ``'0002' != '2'``). A reference that names no run is one
line naming it, and nothing changes. That a cancelled run's training stops (every rank, at its
next heartbeat) is tests/e2e/test_multiworker.py's ``test_cancel_stops_every_rank``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import results_db
from tests.orchestrator.test_hostile_cli import add_run, run_cli

CLI = Path(sys.executable).parent / "orchestrator"


@pytest.fixture()
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


def _states(url: str) -> dict[int, str]:
    db = results_db.open(url)
    return {int(r["id"]): str(r["status"]) for r in db.runs().iter_rows(named=True)}


def test_cancel_by_padded_id_ends_pending_and_running_runs(capsys, url: str) -> None:
    db = results_db.open(url)
    pending = add_run(db, "s", "a-s0", status="pending")
    running = add_run(db, "s", "b-s0", status="pending")
    att = db.start_attempt(running, host="h")  # a trial holds it
    done = add_run(db, "s", "c-s0", status="succeeded")
    code, out, err = run_cli(capsys, "cancel", f"{pending:04d}", f"{running:04d}", str(done),
                             "--db", url)
    assert code == 0, err
    assert out.strip() == "cancelled 2 run(s) (1 were already finished)"
    assert _states(url) == {pending: "cancelled", running: "cancelled", done: "succeeded"}
    [ended] = results_db.open(url).attempts(running)
    assert ended.id == att.id and ended.status == "cancelled" and ended.ended is not None


def test_padded_digits_that_are_another_runs_name_are_ambiguous(capsys, url: str) -> None:
    db = results_db.open(url)
    add_run(db, "s", "a-s0", status="pending")
    second = add_run(db, "s", "b-s0", status="pending")  # id 2
    named = add_run(db, "s", f"{second:04d}", status="pending")  # named "0002"
    before = _states(url)
    for cmd in ("cancel", "show", "rerun"):
        code, _, err = run_cli(capsys, cmd, f"{second:04d}", "--db", url)
        assert code == 2 and err.count("\n") == 1, err
        assert f"run reference '{second:04d}' is ambiguous" in err and f"{named} (s)" in err, err
    assert _states(url) == before
    assert run_cli(capsys, "cancel", str(second), "--db", url)[0] == 0  # '2' is nobody's name
    assert _states(url)[second] == "cancelled" and _states(url)[named] == "pending"
    assert run_cli(capsys, "cancel", "b-s0", "--db", url)[0] == 0  # the name works too


@pytest.mark.parametrize("ref", ["99999", "0099999", "nosuch", "\u0662", "-s0"])
def test_a_reference_to_no_run_is_one_line_naming_it(capsys, url: str, ref: str) -> None:
    db = results_db.open(url)
    a = add_run(db, "s", "a-s0", status="pending")
    code, out, err = run_cli(capsys, "cancel", "--db", url, "--", ref)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("error: ") and f"no run with id or name {ref!r}" in err, err
    assert _states(url) == {a: "pending"}
