"""One live attempt per run (results_db/write/claims.py), on SQLite and PostgreSQL: the claim
compare-and-set under real concurrent processes, heartbeats that tell a superseded attempt to
stop, finishes that cannot move a run they no longer hold, fault classes, leases, live_runs."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

import results_db
from contract.states import (
    FaultClass,
    InvalidTransition,
    run_status_after,
    stale_after_s,
    status_group,
)
from tests.support.procs import clean_context
from tests.support.silence import silence


def _new(name: str) -> results_db.NewRun:
    return results_db.NewRun(name=name, fingerprint=f"fp-{name}", variant=name, seed=0,
                             config={"name": name, "train": {"steps": 100}})


def _runs(db, n: int, sweep: str = "s") -> list[int]:
    sid = db.ensure_sweep(sweep)
    return [r.id for r in db.register_runs(sid, [_new(f"{sweep}{i}") for i in range(n)]).to_run]


def _claimer(url: str, run_ids: list[int], who: str, barrier, out,
             trial_id: str | None = None) -> None:
    db = results_db.open(url, migrate=False)
    barrier.wait(timeout=300)  # every process starts claiming at the same moment
    won = [rid for rid in run_ids
           if db.claim_run(rid, f"submit {who} on host test", "h",
                           trial_id=trial_id or who) is not None]
    out.put((who, won))
    db.close()


def _collect(out, procs, limit_s: float = 600.0):
    """Each claimer's (who, won), failing at once (not after the limit) when one dies."""
    got, deadline = [], time.monotonic() + limit_s  # generous: start-up on a loaded host
    while len(got) < len(procs):
        try:
            got.append(out.get(timeout=1))
        except Exception:  # queue.Empty
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            assert not dead, f"a claimer process died (exit codes {dead})"
            assert time.monotonic() < deadline, f"only {len(got)} of {len(procs)} claimers answered"
    return got


@pytest.mark.parametrize("trial_ids", ["distinct", "colliding"])
def test_concurrent_processes_claim_each_run_exactly_once(db_url: str, trial_ids: str) -> None:
    """4 processes race for the same 6 runs: each run is won by exactly one of them, with
    exactly one attempt row, owned by the winner -- also when every driver's Tune trial has
    the same id (Tune's ids can collide across drivers)."""
    db = results_db.open(db_url)
    ids = _runs(db, 6)
    # forked from a server that imported results_db once (not 4 interpreters a case): each
    # claimer is still a process of its own with its own connections
    ctx = clean_context(__name__)
    barrier, out = ctx.Barrier(4), ctx.Queue()
    same = "00000_00000" if trial_ids == "colliding" else None
    procs = [ctx.Process(target=_claimer, args=(db_url, ids, f"p{i}", barrier, out, same))
             for i in range(4)]
    for p in procs:
        p.start()
    results = dict(_collect(out, procs))
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    won = [rid for lst in results.values() for rid in lst]
    assert sorted(won) == sorted(ids)  # every run once, none twice
    for who, lst in results.items():
        for rid in lst:
            atts = db.attempts(rid)
            assert [(a.number, a.status, a.owner) for a in atts] == [
                (1, "running", f"submit {who} on host test")]
            assert db.run(rid).status == "running"


def test_claim_refuses_a_live_holder_and_says_who(db_url: str) -> None:
    db = results_db.open(db_url)
    (rid,) = _runs(db, 1)
    a1 = db.claim_run(rid, "submit 3f2a on host x", "x/node1", trial_id="t1")
    assert a1 is not None and a1.owner == "submit 3f2a on host x" and a1.number == 1
    assert db.claim_run(rid, "submit 9b9b on host y", "y", trial_id="t9") is None
    msg = str(db.claim_refusal(rid))
    assert msg == "run 1 is running under submit 3f2a on host x (x/node1)".replace(
        "run 1", f"run {rid}")
    with pytest.raises(InvalidTransition, match="is running under submit 3f2a"):
        db.start_attempt(rid, host="h")
    assert db.heartbeat(a1.id) is True
    db.finish_attempt(a1.id, "succeeded")
    assert db.claim_run(rid, "late", "h") is None
    assert "cannot go from succeeded to running" in str(db.claim_refusal(rid))
    with pytest.raises(results_db.NotFound, match="run id 999"):
        db.claim_run(999, "o", "h")


def test_equal_trial_ids_never_take_over_another_drivers_live_attempt(db_url: str) -> None:
    """Two drivers' trials with one Tune trial id. The second driver's claim is
    refused (the live attempt stays running, not worker_died) and names the holder; a
    finished attempt is never relabelled. Only the holder's own driver may take over its
    live attempt (its earlier process ended unseen: failed/worker_died)."""
    db = results_db.open(db_url)
    a, b = _runs(db, 2)
    tid = "a1b2c_00000"
    held = db.claim_run(a, "submit 1111 on host x (pid 1)", "x", trial_id=tid)
    assert db.claim_run(a, "submit 2222 on host y (pid 2)", "y", trial_id=tid) is None
    assert [(x.status, x.fault) for x in db.attempts(a)] == [("running", None)]
    assert db.heartbeat(held.id) is True
    assert "running under submit 1111" in str(db.claim_refusal(a))
    # the holder's own driver claims again (Tune restarted its trial): the old one died
    again = db.claim_run(a, "submit 1111 on host x (pid 1)", "x", trial_id="other_00001")
    assert again is not None and again.number == 2
    first = db.attempts(a)[0]
    assert (first.status, first.fault) == ("failed", "worker_died")
    assert db.heartbeat(held.id) is False and db.heartbeat(again.id) is True
    # a finished attempt stays as it ended, whoever claims with its trial id afterwards
    done = db.claim_run(b, "submit 1111 on host x (pid 1)", "x", trial_id=tid)
    db.finish_attempt(done.id, "succeeded")
    assert db.claim_run(b, "submit 2222 on host y (pid 2)", "y", trial_id=tid) is None
    assert [(x.status, x.fault) for x in db.attempts(b)] == [("succeeded", None)]
    assert db.run(b).status == "succeeded"


def test_stale_lease_is_taken_over_and_the_old_attempt_cannot_finish_the_run(db_url) -> None:
    db = results_db.open(db_url)
    (rid,) = _runs(db, 1)
    old = db.claim_run(rid, "driver A", "h", trial_id="ta", heartbeat_s=0.2)
    assert stale_after_s(0.2) == pytest.approx(2.6)
    assert db.claim_run(rid, "driver B", "h", trial_id="tb") is None  # fresh: refused
    silence(db, old.id, 1.5)
    assert db.stale_attempts([rid]) == []  # silent 1.5 s: not yet past its 2.6 s
    assert db.claim_run(rid, "driver B", "h", trial_id="tb") is None
    silence(db, old.id, 1.3)
    assert [a.id for a in db.stale_attempts([rid])] == [old.id]
    new = db.claim_run(rid, "driver B", "h", trial_id="tb")
    assert new is not None and new.number == 2
    first = db.attempts(rid)[0]
    assert (first.status, first.fault) == ("lost", "superseded")
    # the superseded worker learns it at its next heartbeat, and its report changes nothing
    assert db.heartbeat(old.id) is False
    assert db.finish_attempt(old.id, "succeeded").status == "lost"
    assert db.run(rid).status == "running" and db.heartbeat(new.id) is True
    db.finish_attempt(new.id, "succeeded")
    assert db.run(rid).status == "succeeded"


def test_faults_set_the_run_status(db_url: str) -> None:
    db = results_db.open(db_url)
    a, b, c = _runs(db, 3)
    att = db.claim_run(a, "d", "h")
    db.finish_attempt(att.id, "failed", error="SIGTERM", fault="preempted")
    assert db.run(a).status == "lost"  # preempted: unfinished, resumable
    assert db.attempts(a)[0].fault == "preempted"
    again = db.claim_run(a, "d", "h")  # lost -> running
    assert again is not None and again.number == 2
    att = db.claim_run(b, "d", "h")
    db.finish_attempt(att.id, "failed", error="boom", traceback="Traceback...",
                      fault=FaultClass.CODE_ERROR)
    assert db.run(b).status == "failed"
    assert db.claim_run(b, "d", "h") is not None  # failed -> running: a retry
    att = db.claim_run(c, "d", "h")
    with pytest.raises(ValueError, match="'gremlins' is not a fault class"):
        db.finish_attempt(att.id, "failed", fault="gremlins")
    assert run_status_after("failed", FaultClass.WORKER_DIED) == "failed"
    assert run_status_after("succeeded", None) == "succeeded"


def test_cancel_stops_the_attempt_and_keeps_the_run_cancelled(db_url: str) -> None:
    db = results_db.open(db_url)
    (rid,) = _runs(db, 1)
    att = db.claim_run(rid, "d", "h")
    assert db.set_status([rid], "cancelled") == [rid]
    assert db.heartbeat(att.id) is False
    db.finish_attempt(att.id, "failed", fault="code_error")
    assert db.run(rid).status == "cancelled"
    assert db.attempts(rid)[0].fault == "cancelled"


def test_reconcile_uses_each_attempts_own_interval(db_url: str) -> None:
    db = results_db.open(db_url)
    quick, slow = _runs(db, 2)
    q = db.claim_run(quick, "d", "h", heartbeat_s=0.1)  # stale after 2.3 s
    w = db.claim_run(slow, "d", "h", heartbeat_s=30)  # stale after 92 s
    for att in (q, w):
        silence(db, att.id, 2.5)
    assert db.reconcile() == [quick]
    att = db.attempts(quick)[0]
    assert (att.status, att.fault) == ("lost", "no_heartbeat")
    assert db.run(slow).status == "running"
    assert status_group(db.run(quick).status) == "waiting"
    assert status_group("succeeded") == "done-ok" and status_group("cancelled") == "done-bad"
    assert status_group("running") == "live"


def test_leases_tell_a_dead_drivers_queue_from_a_live_one(db_url: str) -> None:
    db = results_db.open(db_url)
    a, b = _runs(db, 2)
    assert db.renew_leases([a, b], "submit 1 on h", lease_s=60) == 2
    assert db.run(a).owner == "submit 1 on h"
    assert results_db.write.claims.lease_live(db.run(a).lease_until)
    db.release_leases([a], "submit 1 on h")
    db.release_leases([b], "someone else")  # not theirs: stays
    assert db.run(a).lease_until is None and db.run(b).lease_until is not None
    live = db.live_runs("s")
    by_id = {r["run_id"]: r for r in live.iter_rows(named=True)}
    assert by_id[a]["lease_s_left"] is None and by_id[b]["lease_s_left"] > 50


def test_live_runs_reports_progress_eta_and_heartbeat_age(db_url: str) -> None:
    db = results_db.open(db_url)
    a, b, c = _runs(db, 3)
    att = db.claim_run(a, "submit x on h", "h")
    db.log_metrics(a, att.id, [(s, "train/loss", 5.0 - s / 100) for s in range(10, 60, 10)]
                   + [(50, "train/tokens_per_s", 1234.0)])
    time.sleep(0.3)
    done = db.claim_run(c, "d", "h")
    db.finish_attempt(done.id, "succeeded")
    live = db.live_runs("s")
    assert live.columns[:12] == ["run_id", "name", "sweep", "variant", "status", "attempt_id",
                                 "step", "steps_total", "last_loss", "tokens_per_s", "eta_s",
                                 "heartbeat_age_s"]
    assert live["run_id"].to_list() == [a, b]  # the finished run is not live
    ra, rb = live.row(0, named=True), live.row(1, named=True)
    assert (ra["status"], ra["attempt_id"], ra["step"], ra["last_loss"]) == (
        "running", att.id, 50, pytest.approx(4.5))
    assert ra["tokens_per_s"] == 1234.0 and ra["owner"] == "submit x on h"
    assert 0.2 < ra["heartbeat_age_s"] < 30 and ra["eta_s"] is not None and ra["eta_s"] > 0
    assert rb["status"] == "pending" and rb["heartbeat_age_s"] is None and rb["step"] is None
    every = db.live_runs(run_ids=[a, c], statuses=None)
    assert every["status"].to_list() == ["running", "succeeded"]
    assert db.live_runs("no such sweep").height == 0


def test_a_silent_attempt_has_no_eta(db_url: str) -> None:
    """With its driver dead, a run's ETA grew with the wall clock. Once its attempt
    is stale (no heartbeat for 3 intervals + 2 s) the ETA is unknown (None), not a guess."""
    db = results_db.open(db_url)
    (rid,) = _runs(db, 1)
    att = db.claim_run(rid, "submit x on h", "h", heartbeat_s=0.1)  # stale after 2.3 s
    db.log_metrics(rid, att.id, [(s, "train/loss", 1.0) for s in (10, 20, 30)])
    time.sleep(0.3)
    fresh = db.live_runs("s").row(0, named=True)
    assert fresh["stale"] is False and fresh["eta_s"] is not None and fresh["eta_s"] > 0
    silence(db, att.id, 2.3)
    silent = db.live_runs("s").row(0, named=True)
    assert silent["stale"] is True and silent["eta_s"] is None
    assert silent["step"] == 30 and silent["status"] == "running"


@pytest.mark.postgres
def test_a_claim_that_read_before_a_racing_attempt_claims_again(pg_url: str) -> None:
    """PostgreSQL's one-statement claim (claims._CLAIM_IN_ONE) reads at its start and takes
    the run's row lock after. Here another writer holds that lock, adds attempt 2 and leaves
    the run claimable: the claim's own attempt 2 is refused by uq_attempts_run_number, and
    claim_run's transaction claims again -- attempt 3, no error, nothing doubled."""
    db = results_db.open(pg_url)
    (rid,) = _runs(db, 1)
    first = db.claim_run(rid, "submit a", "h")
    assert first is not None
    db.finish_attempt(first.id, "failed")  # the run is failed: claimable
    got: dict[str, object] = {}
    # the lock holder and the watcher are plain connections: a results_db one would be ended
    # by its idle-in-transaction timeout (10 s) if the claimer thread started late under load
    watch = create_engine(pg_url, poolclass=NullPool)
    with watch.connect() as other:
        other.execute(text("SELECT id FROM runs WHERE id = :r FOR UPDATE"), {"r": rid})
        other.execute(text("INSERT INTO attempts (run_id, number, status, started, host, owner)"
                           " VALUES (:r, 2, 'failed', now(), 'h', 'submit b')"), {"r": rid})
        claimer = threading.Thread(target=lambda: got.update(att=db.claim_run(rid, "submit c",
                                                                              "h")))
        claimer.start()
        deadline = time.monotonic() + 60
        with watch.connect() as w:  # the claim's statement waits for the run's row lock
            while not w.execute(text(
                    "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'WITH won AS%'")).first():
                assert time.monotonic() < deadline, "the claim never waited for the run's lock"
                time.sleep(0.05)
        other.commit()
    claimer.join(60)
    watch.dispose()
    att = got["att"]
    assert isinstance(att, results_db.AttemptRow) and att.number == 3
    assert [(a.number, a.status, a.owner) for a in db.attempts(rid)] == [
        (1, "failed", "submit a"), (2, "failed", "submit b"), (3, "running", "submit c")]
    assert db.run(rid).status == "running"
