"""results_db writes: schema by migration, registration/dedupe, states, attempts, values."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text

import results_db
from results_db import InvalidTransition, NewRun, RunStatus
from tests.support.silence import silence
from tests.support.synth import gate_config


def _new(name: str, fp: str | None = None, variant: str = "baseline", seed: int = 0,
         **cfg_kw: object) -> NewRun:
    return NewRun(name=name, fingerprint=fp or f"fp-{name}", variant=variant, seed=seed,
                  config=gate_config(seed=seed, **cfg_kw))  # type: ignore[arg-type]


@pytest.fixture
def db(db_url: str):
    with results_db.open(db_url) as d:
        yield d


def test_schema_is_created_by_the_migration(db) -> None:
    insp = inspect(db.engine)
    tables = set(insp.get_table_names())
    assert {"sweeps", "runs", "attempts", "metrics", "summaries", "artifacts",
            "alembic_version"} <= tables
    assert {"run_summary", "leaderboard"} <= set(insp.get_view_names())
    with db.engine.connect() as conn:
        rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    from results_db.schema.migrate import HEAD_REVISION
    from tests.support.migrations import head_revision
    assert rev == head_revision() == HEAD_REVISION
    dims = {c["name"] for c in insp.get_columns("runs")}
    assert {"gate_position", "gate_granularity", "lr", "n_kv_head", "params_gates"} <= dims
    # (run_id, name, step) is unique: it is the metrics table's primary key
    assert insp.get_pk_constraint("metrics")["constrained_columns"] == ["run_id", "name", "step"]
    assert results_db.upgrade(db.url) == HEAD_REVISION  # idempotent: already at head


def test_ensure_sweep_upserts_by_name(db) -> None:
    a = db.ensure_sweep("s", "v1", "first")
    b = db.ensure_sweep("s", "v2")
    assert a == b
    sweeps = db.sweeps()
    assert sweeps.height == 1 and sweeps["spec"][0] == "v2"
    assert sweeps["description"][0] == "first"  # an empty description does not erase it


def test_register_dedupes_by_fingerprint_and_derives_dims(db) -> None:
    sid = db.ensure_sweep("s")
    gates = [{"position": "G2"}, {"position": "G1", "granularity": "headwise"}]
    res = db.register_runs(sid, [_new("a"), _new("b", gates=gates, lr=1e-3)])
    assert [r.status for r in res.to_run] == ["pending", "pending"] and not res.cached
    b = res.to_run[1]
    assert b.dims["gate_position"] == "G1+G2" and b.dims["n_gates"] == 2
    assert b.dims["gate_granularity"] == "headwise+elementwise"
    assert b.dims["lr"] == 1e-3 and res.to_run[0].dims["gate_position"] is None
    again = db.register_runs(sid, [_new("a"), _new("b", gates=gates, lr=1e-3)])
    assert [r.id for r in again.to_run] == [r.id for r in res.to_run]  # pending -> to_run again
    assert db.runs().height == 2
    twice = db.register_runs(sid, [_new("c"), _new("c")])  # listed twice: registered once
    assert [r.name for r in twice.to_run] == ["c"] and db.runs().height == 3
    # gate dimension filters work in SQL
    assert db.runs(gate_position="G1+G2")["name"].to_list() == ["b"]
    assert db.runs(n_gates=0)["name"].to_list() == ["a", "c"]
    with pytest.raises(ValueError, match="unknown filter 'colour'"):
        db.runs(colour="red")


def _finish(db, run_id: int, status: str) -> None:
    att = db.start_attempt(run_id, host="h")
    db.finish_attempt(att.id, status)


def test_register_cached_vs_to_run_and_force(db) -> None:
    sid = db.ensure_sweep("s")
    ids = {r.name: r.id for r in db.register_runs(
        sid, [_new(n) for n in ("ok", "div", "bad", "gone", "stop", "live")]).to_run}
    for name, status in (("ok", "succeeded"), ("div", "diverged"), ("bad", "failed"),
                         ("gone", "lost"), ("stop", "cancelled")):
        _finish(db, ids[name], status)
    db.start_attempt(ids["live"], host="h")
    runs = [_new(n) for n in ("ok", "div", "bad", "gone", "stop", "live", "new")]
    res = db.register_runs(sid, runs)
    assert sorted(r.name for r in res.cached) == ["div", "ok"]
    assert sorted(r.name for r in res.to_run) == ["bad", "gone", "new", "stop"]
    assert [r.name for r in res.running] == ["live"]
    assert all(r.status == "pending" for r in res.to_run)
    assert db.run(ids["ok"]).status == "succeeded"
    forced = db.register_runs(sid, runs, force=True)
    assert not forced.cached and sorted(r.name for r in forced.to_run) == \
        ["bad", "div", "gone", "new", "ok", "stop"]
    assert db.run("ok").status == "pending" and db.run("live").status == "running"


def test_attempt_numbering_and_state_transitions(db) -> None:
    sid = db.ensure_sweep("s")
    run = db.register_runs(sid, [_new("a")]).to_run[0]
    a1 = db.start_attempt(run.id, host="h1", trial_id="t1", pid=42)
    assert (a1.number, a1.status, a1.pid, a1.trial_id) == (1, "running", 42, "t1")
    assert db.run(run.id).status == "running"
    db.finish_attempt(a1.id, "failed", error="boom", traceback="Traceback ...")
    assert db.run(run.id).status == "failed"
    # retry in place: failed -> running, by driver "driver"
    a2 = db.start_attempt(run.id, host="h2", trial_id="t2", owner="driver")
    assert a2.number == 2
    # a2 is live: a second attempt is refused (never running -> running)...
    with pytest.raises(InvalidTransition, match="running under"):
        db.start_attempt(run.id, host="h3")
    assert db.claim_run(run.id, "other driver", "h3") is None
    # ...not even by another driver whose Tune trial id collides...
    assert db.claim_run(run.id, "another driver", "h3", trial_id="t2") is None
    # ...except by its own driver, restarting the same Tune trial (its old process is gone)
    a3 = db.claim_run(run.id, "driver", "h3", trial_id="t2")
    assert a3 is not None and a3.number == 3
    db.finish_attempt(a3.id, "succeeded")
    atts = db.attempts(run.id)
    assert [(a.number, a.status) for a in atts] == [(1, "failed"), (2, "failed"), (3, "succeeded")]
    assert atts[1].fault == "worker_died"
    assert atts[0].error == "boom" and atts[0].traceback == "Traceback ..."
    assert atts[2].ended is not None and atts[2].ended.tzinfo is not None
    assert [a.host for a in atts] == ["h1", "h2", "h3"]
    # the first report wins: a late duplicate finish changes nothing
    assert db.finish_attempt(a3.id, "failed").status == "succeeded"
    assert db.run(run.id).status == "succeeded"
    with pytest.raises(InvalidTransition, match="cannot go from succeeded to running"):
        db.start_attempt(run.id, host="h")
    with pytest.raises(ValueError, match="does not end an attempt"):
        db.finish_attempt(a3.id, "pending")
    with pytest.raises(results_db.NotFound, match="run id 999"):
        db.start_attempt(999, host="h")


def test_set_status_cancel_and_rerun(db) -> None:
    sid = db.ensure_sweep("s")
    ids = [r.id for r in db.register_runs(sid, [_new("a"), _new("b"), _new("c")]).to_run]
    att = db.start_attempt(ids[0], host="h")
    _finish(db, ids[1], "succeeded")
    # cancel: pending and running may be cancelled, a succeeded run is skipped
    assert db.set_status(ids, "cancelled") == [ids[0], ids[2]]
    assert db.attempts(ids[0])[0].status == "cancelled"
    assert db.run(ids[1]).status == "succeeded"
    # the cancelled run's worker reports late: the run stays cancelled
    db.finish_attempt(att.id, "failed")
    assert db.run(ids[0]).status == "cancelled"
    assert db.set_status(ids, RunStatus.PENDING) == ids  # rerun
    db.start_attempt(ids[0], host="h")
    assert db.set_status([ids[0]], "pending") == []  # running -> pending: skipped...
    with pytest.raises(InvalidTransition, match="cannot go from running to pending"):
        db.set_status([ids[0]], "pending", strict=True)  # ...or refused
    with pytest.raises(ValueError, match="'done' is not a run status"):
        db.set_status(ids, "done")


def test_set_status_only_from_leaves_runs_in_other_states(db) -> None:
    """What an interrupted driver does: cancel its pending and running runs only. A `lost`
    run may be cancelled by the state machine, but only_from keeps it resumable."""
    from contract.states import CANCELLABLE

    sid = db.ensure_sweep("s")
    ids = [r.id for r in db.register_runs(sid, [_new("a"), _new("b"), _new("c")]).to_run]
    db.start_attempt(ids[0], host="h")
    lost = db.start_attempt(ids[1], host="h")
    db.finish_attempt(lost.id, "failed", fault="preempted")  # -> run lost
    assert db.run(ids[1]).status == "lost"
    assert db.set_status(ids, "cancelled", only_from=CANCELLABLE) == [ids[0], ids[2]]
    assert [db.run(i).status for i in ids] == ["cancelled", "lost", "cancelled"]


def test_metrics_upsert_is_idempotent_per_run_name_step(db) -> None:
    sid = db.ensure_sweep("s")
    run = db.register_runs(sid, [_new("a")]).to_run[0]
    a1 = db.start_attempt(run.id, host="h")
    pts = [(s, n, float(s)) for s in range(100) for n in ("train/loss", "train/lr")]
    assert db.log_metrics(run.id, a1.id, pts) == 200
    db.finish_attempt(a1.id, "failed")
    a2 = db.start_attempt(run.id, host="h")
    # the retry resumes from step 50 and re-logs 50..99 with new values, then goes on
    pts2 = [(s, "train/loss", -float(s)) for s in range(50, 150)]
    db.log_metrics(run.id, a2.id, pts2 + [(149, "train/loss", 7.0)])  # last wins in a batch
    m = db.metrics([run.id], ["train/loss"])
    assert m.height == 150  # exact: no duplicates for the re-logged steps
    by_step = dict(zip(m["step"].to_list(), m["value"].to_list()))
    assert by_step[10] == 10.0 and by_step[60] == -60.0 and by_step[149] == 7.0
    rows = db.query(f"SELECT attempt_id, COUNT(*) AS n FROM metrics WHERE run_id = {run.id} "
                    "AND name = 'train/loss' GROUP BY attempt_id ORDER BY attempt_id")
    assert rows.rows() == [(a1.id, 50), (a2.id, 100)]
    assert db.metrics([run.id], ["train/lr"]).height == 100


def test_nan_is_stored_as_null(db) -> None:
    sid = db.ensure_sweep("s")
    run = db.register_runs(sid, [_new("a")]).to_run[0]
    att = db.start_attempt(run.id, host="h")
    db.log_metrics(run.id, att.id, [(1, "train/loss", float("nan")),
                                    (2, "train/loss", float("inf"))])
    db.log_summaries(run.id, att.id, {"val/loss": float("nan")})
    vals = db.metrics([run.id])["value"].to_list()
    assert vals[0] is None and vals[1] == float("inf")
    assert db.summaries([run.id])["value"].to_list() == [None]


def test_summaries_upsert_and_params_columns(db) -> None:
    sid = db.ensure_sweep("s")
    run = db.register_runs(sid, [_new("a")]).to_run[0]
    att = db.start_attempt(run.id, host="h")
    db.log_summaries(run.id, att.id, {"val/ppl": 20.0, "params/total": 1000, "params/gates": 64})
    db.log_summaries(run.id, att.id, {"val/ppl": 18.5})
    s = db.summaries([run.id])
    assert dict(zip(s["name"].to_list(), s["value"].to_list())) == \
        {"params/gates": 64.0, "params/total": 1000.0, "val/ppl": 18.5}
    r = db.run(run.id)
    assert (r.params_total, r.params_gates) == (1000, 64)
    assert db.summaries(names=["val/ppl"], sweep="s")["value"].to_list() == [18.5]
    art = db.add_artifact(run.id, att.id, "checkpoint", path="/x/ckpt", data={"step": 5})
    arts = db.artifacts(run.id)
    assert arts["id"].to_list() == [art] and arts["kind"].to_list() == ["checkpoint"]


def test_reconcile_marks_stale_running_runs_lost(db) -> None:
    sid = db.ensure_sweep("s")
    ids = [r.id for r in db.register_runs(sid, [_new("old"), _new("fresh")]).to_run]
    stale = db.start_attempt(ids[0], host="h")
    fresh = db.start_attempt(ids[1], host="h")
    db.heartbeat(fresh.id)
    silence(db, stale.id, 1.2)  # as if 1.2 s had passed with no word from it
    assert db.reconcile(stale_after_s=1.0) == [ids[0]]
    assert db.run(ids[0]).status == "lost" and db.run(ids[1]).status == "running"
    att = db.attempts(ids[0])[0]
    assert att.status == "lost" and "no heartbeat" in (att.error or "")
    assert att.fault == "no_heartbeat"
    assert db.reconcile(stale_after_s=1.0) == []  # nothing left to reconcile
    # the worker was only slow: its next heartbeat tells it to stop, and its late report
    # never moves the run (a new claim resumes it)
    assert db.heartbeat(stale.id) is False
    db.finish_attempt(stale.id, "succeeded")
    assert db.run(ids[0]).status == "lost"
    assert db.attempts(ids[0])[0].status == "lost"


def test_sweep_status_counts(db) -> None:
    sid = db.ensure_sweep("s")
    ids = [r.id for r in db.register_runs(sid, [_new(n) for n in "abcde"]).to_run]
    _finish(db, ids[0], "succeeded")
    _finish(db, ids[1], "failed")
    db.start_attempt(ids[4], host="h")
    assert db.reconcile(stale_after_s=0.0) == [ids[4]]  # silent -> lost: resumable, not done
    db.start_attempt(ids[2], host="h")
    db.ensure_sweep("empty")
    st = db.sweep_status()
    row = st.filter(st["sweep"] == "s").row(0, named=True)
    assert (row["succeeded"], row["failed"], row["running"], row["pending"], row["lost"]) == \
        (1, 1, 1, 1, 1)
    assert (row["total"], row["done"]) == (5, 2)
    assert st.filter(st["sweep"] == "empty")["total"].to_list() == [0]
    assert db.sweep_status("s").height == 1


def test_open_validates_the_url(tmp_path) -> None:
    with pytest.raises(ValueError, match="in-memory"):
        results_db.open("sqlite://")
    with pytest.raises(ValueError, match="unsupported backend 'mysql'"):
        results_db.open("mysql://x/y")


def test_open_defaults_to_env_url(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GATESWEEP_DB", f"sqlite:///{tmp_path / 'env.db'}")
    with results_db.open() as d:
        assert d.url.database == str(tmp_path / "env.db")
    assert (tmp_path / "env.db").exists()


def test_migration_downgrades_and_upgrades_again(db) -> None:
    from results_db.schema.migrate import current_revision, upgrade_engine
    from tests.support.migrations import downgrade_engine, head_revision

    downgrade_engine(db.engine, "base")
    assert current_revision(db.engine) is None
    assert not {"runs", "metrics"} & set(inspect(db.engine).get_table_names())
    upgrade_engine(db.engine)
    assert current_revision(db.engine) == head_revision()
    assert db.ensure_sweep("again") == 1


def test_synth_fill_writes_through_the_api(db) -> None:
    from tests.support.synth import fill

    stats = fill(db, runs=12, points=50, seeds=2, lrs=(1e-3, 2e-2))
    assert stats["runs"] == 12 and stats["metric_rows"] == 600
    assert db.query("SELECT COUNT(*) AS n FROM metrics")["n"][0] == 600
    st = db.sweep_status("synth").row(0, named=True)
    assert st["succeeded"] + st["diverged"] == 12 and st["diverged"] == 2  # baseline @ 2e-2
    lb = db.leaderboard("synth")
    assert set(lb["variant"]) == {"baseline", "sdpa_elementwise", "sdpa_headwise"}


def test_state_machine_table() -> None:
    from contract.states import DONE_OK, TERMINAL, allowed

    assert {s.value for s in TERMINAL} == {"succeeded", "failed", "diverged", "cancelled",
                                           "lost"}
    assert allowed("pending", "running") and allowed("running", "diverged")
    for done in TERMINAL:  # every finished run can be queued again (rerun / --force)
        assert allowed(done, "pending")
    for done in DONE_OK:  # a kept result is never silently restarted
        assert not allowed(done, "running")
    assert not allowed("running", "pending") and not allowed("succeeded", "failed")
    assert not allowed("pending", "succeeded")  # results need an attempt
    with pytest.raises(ValueError, match="expected one of pending, running"):
        allowed("pending", "paused")
