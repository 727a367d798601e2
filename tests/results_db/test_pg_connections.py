"""PostgreSQL connections are bounded (docs/cluster.md "Connections to PostgreSQL").

- One process holding a ResultsDB keeps at most ``2 x PG_POOL_SIZE`` = 4 server connections,
  however many of its threads write and read at once (SQLAlchemy's default pools let it hold
  up to 30: 5 + 10 overflow per engine, writer + reader).
- A server whose slots are used up (``max_connections``, or here a role's CONNECTION LIMIT,
  the same SQLSTATE 53300) ends an attempt with fault ``db_connections``, recorded by the
  driver's callback on the handle it opened before the trials; once slots are free, the rerun
  finishes the run with every metric point exactly once.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

import results_db
from contract.config import RunSpec
from orchestrator.run.health.faults import Fault, RetryPolicy, classify
from orchestrator.run.trial.runner import execute_job
from orchestrator.run.trial.trial_job import RUN_KEY, TrialJob, trial_config
from orchestrator.run.trial.trial_sync import DBSyncCallback
from results_db.dberrors import DBConnectionsExhausted, DBUnavailable
from results_db.engine import PG_POOL_SIZE
from results_db.read.pgstat import connections
from tests.db_fixtures import TEST_DB, PgServer

TRAIN = dict(steps=6, batch_size=2, seq_len=16, warmup=0, log_every=1, eval_every=0,
             eval_batches=1, checkpoint_every=0)


def _one_run(db: results_db.ResultsDB, name: str = "r") -> tuple[RunSpec, int]:
    spec = RunSpec(name=name, sweep="conns", model={"preset": "tiny"}, train=TRAIN)
    sid = db.ensure_sweep("conns")
    run = db.register_runs(sid, [results_db.NewRun(
        name=name, fingerprint=spec.fingerprint(), variant="baseline", seed=0,
        config=spec.model_dump(mode="json"))]).to_run[0]
    return spec, run.id


def test_one_process_holds_at_most_four_connections(pg_url: str) -> None:
    # Handles that earlier tests in this worker left open hold idle connections of this pid
    # too: the bound is on what this handle adds.
    before = connections(pg_url).by_pid.get(os.getpid(), 0)
    db = results_db.open(pg_url)
    _, run_id = _one_run(db)
    att = db.claim_run(run_id, "test", "h")
    assert att is not None
    stop, errors, peak = threading.Event(), [], [0]

    def work(i: int) -> None:  # writers and readers at once, as a trial's threads and more
        try:
            while not stop.is_set():
                db.log_metrics(run_id, att.id, [(i, "train/loss", float(i))])
                db.heartbeat(att.id)
                db.run(run_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        peak[0] = max(peak[0], connections(pg_url).by_pid.get(os.getpid(), 0) - before)
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(30)
    assert not errors, errors[:1]
    assert 2 <= peak[0] <= 2 * PG_POOL_SIZE == 4  # the old default pools reached 12+ here
    assert db.metrics([run_id])["step"].n_unique() == 12  # every thread's write landed
    db.close()


@pytest.fixture
def limited(pg_server: PgServer, pg_url: str) -> tuple[str, str]:
    """(superuser URL, URL of a role allowed 3 connections) on the same fresh schema."""
    role = f"lim_{uuid.uuid4().hex[:8]}"
    schema = pg_url.rsplit("%3D", 1)[1]
    pg_server.admin(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 3; "
                    f"GRANT ALL ON SCHEMA {schema} TO {role}", dbname=TEST_DB)
    results_db.open(pg_url).close()  # create the tables as the owner
    pg_server.admin(f"GRANT ALL ON ALL TABLES IN SCHEMA {schema} TO {role}; "
                    f"GRANT ALL ON ALL SEQUENCES IN SCHEMA {schema} TO {role}", dbname=TEST_DB)
    return pg_url, pg_url.replace("postgres@", f"{role}@", 1)


def test_exhausted_connections_fail_the_attempt_by_name_and_a_rerun_finishes(
        limited: tuple[str, str], tmp_path: Path) -> None:
    owner_url, url = limited
    spec, run_id = _one_run(results_db.open(owner_url))
    job = TrialJob.of(run_id, "r", spec, tmp_path / "ckpt", url, flush_s=0.001,
                      heartbeat_s=0.5, db_wait_s=0.5)  # the trial rides out 0.5 s, then ends
    callback = DBSyncCallback(url, "submit t on h")
    callback.setup()  # the driver's handle: 2 of the role's 3 slots
    hog = results_db.open(url, migrate=False)
    hog.run(run_id)  # the 3rd: the server has no slot left for the trial
    with pytest.raises(DBUnavailable, match="has no free connection.*too many conn") as info:
        execute_job(job, trial_id="t1")
    assert isinstance(info.value, DBConnectionsExhausted) or \
        isinstance(info.value.__cause__, DBConnectionsExhausted)  # waited out: DBOutage
    try:
        execute_job(job, trial_id="t1")
    except DBUnavailable as exc:
        assert classify(exc) is Fault.DB_CONNECTIONS
        assert RetryPolicy(retries=1).should_retry(Fault.DB_CONNECTIONS)
        err = tmp_path / "error.txt"  # what Tune's error file holds: the trial's traceback
        err.write_text(f"Traceback (most recent call last):\n{type(exc).__module__}."
                       f"{type(exc).__name__}: {exc}\n")
    trial = SimpleNamespace(config={RUN_KEY: trial_config(job, 0)}, trial_id="t1",
                            error_file=str(err))
    callback.on_trial_error(0, [], trial)
    owner = results_db.open(owner_url)
    att = owner.attempts(run_id)[-1]
    assert (att.status, att.fault) == ("failed", "db_connections")
    assert "has no free connection" in att.error and owner.run(run_id).status == "failed"
    hog.close()
    callback.on_experiment_end([])  # slots free again: the rerun claims and trains
    out = execute_job(job, trial_id="t2")
    assert out.status == "succeeded"
    assert owner.run(run_id).status == "succeeded"
    pts = owner.metrics([run_id], ["train/loss"])
    assert sorted(pts["step"].to_list()) == list(range(1, TRAIN["steps"] + 1))  # none lost
    owner.close()
