"""Scheduler pieces that need no Ray cluster: the DB-sync callback and checkpoint paths."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import results_db
from orchestrator.run.driver.paths import checkpoint_dir
from orchestrator.run.driver.submit import make_plan, register
from orchestrator.run.trial.trial_sync import DBSyncCallback

SMOKE = Path(__file__).resolve().parents[2] / "sweeps" / "smoke.yaml"


@pytest.fixture()
def db_and_runs(tmp_path: Path) -> tuple[str, list[int]]:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    rows = register(results_db.open(url), make_plan(SMOKE), force=False).to_run
    return url, [r.id for r in rows]


def fake_trial(run_id: int, error_file: Path | None) -> SimpleNamespace:
    return SimpleNamespace(config={"run": {"id": run_id, "name": f"r{run_id}", "shape": 0}},
                           trial_id=f"t{run_id}",
                           error_file=None if error_file is None else str(error_file))


def test_worker_death_while_running_is_recorded_as_failed(db_and_runs: tuple, tmp_path: Path
                                                          ) -> None:
    url, ids = db_and_runs
    db = results_db.open(url)
    db.claim_run(ids[0], "submit 1 on h", "h", trial_id=f"t{ids[0]}")  # then it died
    err = tmp_path / "error.txt"
    err.write_text("Traceback (most recent call last):\nray.exceptions.ActorDiedError: died\n")
    DBSyncCallback(url, "submit 1 on h").on_trial_error(0, [], fake_trial(ids[0], err))
    (att,) = db.attempts(ids[0])
    assert db.run(ids[0]).status == "failed" and att.status == "failed"
    assert att.error == "trial died: ray.exceptions.ActorDiedError: died [worker_died; not retried]"
    assert att.fault == "worker_died" and "Traceback" in att.traceback


def test_a_retried_death_is_recorded_before_the_retry_claims(db_and_runs: tuple,
                                                              tmp_path: Path) -> None:
    """Tune's on_trial_recover (it will retry): the dead attempt ends failed with its fault
    at once, and the retry's claim (same trial) starts attempt 2 from a failed run."""
    url, ids = db_and_runs
    db = results_db.open(url)
    db.claim_run(ids[0], "d", "h", trial_id=f"t{ids[0]}")
    err = tmp_path / "error.txt"
    err.write_text("ray.exceptions.NodeDiedError: the node died\n")
    DBSyncCallback(url, "d", retries=1).on_trial_recover(0, [], fake_trial(ids[0], err))
    (att,) = db.attempts(ids[0])
    assert (att.status, att.fault) == ("failed", "node_lost")
    assert att.error.endswith("[node_lost; retried]")
    again = db.claim_run(ids[0], "d", "h", trial_id=f"t{ids[0]}")
    assert again is not None and again.number == 2


def test_another_drivers_attempt_is_not_touched(db_and_runs: tuple) -> None:
    url, ids = db_and_runs
    db = results_db.open(url)
    other = db.claim_run(ids[0], "submit other", "h", trial_id="their-trial")
    DBSyncCallback(url, "submit me").on_trial_error(0, [], fake_trial(ids[0], None))
    assert db.attempts(ids[0]) == [db.attempts(ids[0])[0]]
    assert db.attempts(ids[0])[0].status == "running" and other is not None


def test_an_equal_trial_id_of_another_driver_is_not_ours(db_and_runs: tuple) -> None:
    """Tune trial ids can collide across drivers. Driver B's trial dies with the
    same id as driver A's live one: A's attempt stays running (was: ended worker_died), and
    a finished attempt of A is never relabelled."""
    url, ids = db_and_runs
    db = results_db.open(url)
    live = db.claim_run(ids[0], "submit A", "h", trial_id=f"t{ids[0]}")
    done = db.claim_run(ids[1], "submit A", "h", trial_id=f"t{ids[1]}")
    db.finish_attempt(done.id, "succeeded")
    cb = DBSyncCallback(url, "submit B")
    cb.on_trial_error(0, [], fake_trial(ids[0], None))
    cb.on_trial_recover(0, [], fake_trial(ids[1], None))
    assert [(a.status, a.fault) for a in db.attempts(ids[0])] == [("running", None)]
    assert db.heartbeat(live.id) is True
    assert [(a.status, a.fault) for a in db.attempts(ids[1])] == [("succeeded", None)]


def test_death_before_the_first_attempt_gets_an_attempt_row(db_and_runs: tuple) -> None:
    url, ids = db_and_runs
    DBSyncCallback(url).on_trial_error(0, [], fake_trial(ids[1], None))
    db = results_db.open(url)
    (att,) = db.attempts(ids[1])
    assert db.run(ids[1]).status == "failed"
    assert "exited without reporting" in att.error


def test_a_trial_that_recorded_its_own_end_is_left_alone(db_and_runs: tuple) -> None:
    url, ids = db_and_runs
    db = results_db.open(url)
    a = db.claim_run(ids[2], "d", "h", trial_id=f"t{ids[2]}")
    db.finish_attempt(a.id, "failed", error="RuntimeError: own words", traceback="tb")
    DBSyncCallback(url, "d").on_trial_error(0, [], fake_trial(ids[2], None))
    (att,) = db.attempts(ids[2])
    assert att.error == "RuntimeError: own words"


def test_checkpoint_dir_is_per_run_and_absolute(tmp_path: Path) -> None:
    p = checkpoint_dir(tmp_path / "runs", "gates-toy", "baseline-s0")
    assert p.is_absolute() and p.parts[-3:] == ("gates-toy", "baseline-s0", "checkpoints")


def test_relative_sqlite_urls_become_absolute(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator.run.env import absolute_db_url

    monkeypatch.chdir(tmp_path)
    assert absolute_db_url("sqlite:///results.db") == f"sqlite:///{tmp_path}/results.db"
    for url in ("sqlite:////abs/r.db", "sqlite://", "postgresql+psycopg://u:pw@h:5432/db"):
        assert absolute_db_url(url) == url


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_db_callback_waits_out_an_outage_then_gives_up_past_its_bound(kind: str) -> None:
    """The SQLite disk full / PostgreSQL stopped while a trial dies. Tune's callback
    does not raise (it used to kill the driver): it waits with backoff until the DB is back
    and records the death; past its bound it hands the outage to the stopper instead."""
    import time

    from orchestrator.run.health.dbretry import OutageState
    from orchestrator.run.trial.trial_sync import OutageStopper
    from tests.outage_fixtures import outage

    with outage(kind) as o:
        rows = register(results_db.open(o.url), make_plan(SMOKE), force=False).to_run
        db = results_db.open(o.url)
        a = db.claim_run(rows[0].id, "d", "h", trial_id=f"t{rows[0].id}")
        b = db.claim_run(rows[1].id, "d", "h", trial_id=f"t{rows[1].id}")
        state = OutageState(wait_s=60)
        cb = DBSyncCallback(o.url, "d", outage=state, say=lambda m: None)
        cb.setup()  # Tune opens the handle before any trial runs
        o.down()
        o.up_after(1.0)  # the retries at 0.5 s fail; the one at 1.5 s (or 3.5 s) is answered
        t0 = time.monotonic()
        cb.on_trial_error(0, [], fake_trial(rows[0].id, None))
        waited = time.monotonic() - t0
        assert 0.9 < waited < 40 and not state.expired, waited
        (att,) = db.attempts(rows[0].id)
        assert (att.id, att.status, att.fault) == (a.id, "failed", "worker_died")

        short = OutageState(wait_s=0.6)  # past the first retry (0.5 s)
        cb = DBSyncCallback(o.url, "d", outage=short, say=lambda m: None)
        cb.setup()
        o.down()
        cb.on_trial_error(0, [], fake_trial(rows[1].id, None))  # no exception
        assert short.expired and OutageStopper(short).stop_all()
        assert "could not be" in short.error
        o.up()
        after = results_db.open(o.url, migrate=False)  # the old pool's connections died
        assert [x.status for x in after.attempts(rows[1].id)] == ["running"]  # for rerun
        assert b is not None


def test_stale_after_help_states_the_derived_default() -> None:
    """--stale-after's help said 120 s; the threshold is each attempt's own
    3 heartbeat intervals + 2 s (contract.states.stale_after_s)."""
    from typing import get_args

    from contract.states import DEFAULT_HEARTBEAT_S, stale_after_s
    from orchestrator.cli.app import StaleOpt

    help_text = get_args(StaleOpt)[1].help
    assert "120" not in help_text
    assert f"{stale_after_s(DEFAULT_HEARTBEAT_S):g} s at the default " \
           f"{DEFAULT_HEARTBEAT_S:g} s" in help_text, help_text


def test_the_callback_and_stopper_survive_tunes_pickling(db_and_runs: tuple) -> None:
    """Tune pickles callbacks and stoppers into its experiment state when the Tuner is built:
    the console the callback talks to (a lock inside) must not travel."""
    import pickle

    from rich.console import Console

    from orchestrator.run.health.dbretry import OutageState
    from orchestrator.run.trial.trial_sync import OutageStopper

    url, _ = db_and_runs
    console = Console()
    state = OutageState(wait_s=5)
    cb = DBSyncCallback(url, "d", outage=state, say=lambda m: console.print(m))
    cb.setup()
    back = pickle.loads(pickle.dumps(cb))
    assert (back.db_url, back.owner, back.outage.wait_s, back.say) == (url, "d", 5, None)
    assert cb.say is not None and cb._db is not None  # the live one keeps them
    assert pickle.loads(pickle.dumps(OutageStopper(state))).stop_all() is False


def test_tune_hooks_pickle_the_same_whatever_the_number_of_runs(tmp_path: Path) -> None:
    """Tune pickles the name creators into every trial's saved state and unpickles the
    resources hook per trial: neither may grow with the sweep. Carrying the jobs was O(runs^2)
    in the driver (1,000 runs kept 2 of 8 slots busy); a closure over the runs'
    names still put ~36 KB into every trial's state. Each trial's config names its run and
    placement instead."""
    import cloudpickle

    from contract.config import RunSpec
    from orchestrator.run.driver.scheduler import trial_name, trial_space
    from orchestrator.run.trial.trial_job import TrialJob, run_id_of

    def jobs(n: int) -> list[TrialJob]:
        out = []
        for i in range(1, n + 1):
            res = {"cpus": 1, "gpus": 0} if i % 2 else {"cpus": 2, "gpus": 1}
            spec = RunSpec(name=f"r{i}", sweep="s", model={"preset": "tiny"},
                           resources=res)
            out.append(TrialJob.of(i, f"r{i}", spec, tmp_path / f"r{i}", "sqlite:///x.db"))
        return out

    res_small = trial_space(jobs(10))[1]
    configs, resources = trial_space(jobs(1000))
    by_id = {c["id"]: {"run": c} for c in configs}
    assert trial_name(SimpleNamespace(config=by_id[7])) == "r7" and run_id_of(by_id[7]) == 7
    assert resources(by_id[7]).bundles == [{"CPU": 1.0}]
    assert resources(by_id[8]).bundles == [{"CPU": 2.0, "GPU": 1.0}]
    assert len(cloudpickle.dumps(resources)) == len(cloudpickle.dumps(res_small))
    assert len(cloudpickle.dumps(trial_name)) < 200  # by reference: a module-level function
