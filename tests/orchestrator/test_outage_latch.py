"""An outage ends in one known state whatever its timing: once the driver has decided to give
up (the Tune stopper told the sweep to stop), that decision stands. The lease keeper's next
good tick, a DB back right after the stop, used to clear it: the driver then took the normal
return (exit 1, runs left ``running`` with no process) instead of the documented give-up path
(exit 2, runs recorded lost and resumable)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import results_db
from orchestrator.run.driver.submit import make_plan, register
from orchestrator.run.health.dbretry import OutageState
from orchestrator.run.health.leases import LeaseKeeper
from orchestrator.run.trial.trial_sync import OutageStopper

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"


@pytest.mark.parametrize("back", ["before", "at", "after"])
def test_the_decision_to_give_up_stands(back: str) -> None:
    """The DB back before the bound: the sweep goes on. Back at or just after the moment the
    stopper fires: the sweep still stops, and stays stopped."""
    state = OutageState(wait_s=0.2)
    stopper = OutageStopper(state)
    state.failed(OSError("connection refused"))
    if back == "before":
        state.ok()
        time.sleep(0.25)
        assert not state.expired and not stopper.stop_all()
        return
    time.sleep(0.25)
    if back == "at":  # the keeper's good tick lands between the expiry and the stopper's look
        assert state.expired
        state.ok()
        assert stopper.stop_all()
    else:
        assert stopper.stop_all()
        state.ok()
    assert state.expired and stopper.stop_all() and state.gave_up


@pytest.mark.postgres
def test_a_real_outage_that_ends_as_the_sweep_stops_stays_given_up() -> None:
    """PostgreSQL really stopped under a running lease keeper, started again the moment the
    stopper fires: the keeper's next tick is good (it says the DB answers again), and the
    sweep is still given up."""
    from tests.outage_fixtures import outage

    said: list[str] = []
    with outage("postgres") as o:
        db = results_db.open(o.url)
        ids = [r.id for r in register(db, make_plan(SMOKE), force=False).to_run]
        state = OutageState(wait_s=0.5)  # a few of the keeper's 0.2 s ticks
        stopper = OutageStopper(state)
        with LeaseKeeper(db, ids, "d", 0.2, said.append, state):
            o.down()
            deadline = time.monotonic() + 60
            while not stopper.stop_all():
                assert time.monotonic() < deadline, said
                time.sleep(0.05)
            o.up()
            while not any("answers again" in m for m in said):
                assert time.monotonic() < deadline, said
                time.sleep(0.1)
            assert state.since is None  # the keeper saw the DB back ...
            assert state.expired and stopper.stop_all()  # ... and the stop stands
