"""End to end: `orchestrator` subprocesses, a real local Ray cluster, DeepSpeed training and
a real SQLite file. Slow (Ray start + a DeepSpeed init per trial): marked ``slow``.

The first submit of test_failure_rerun_resume_and_cache and the SIGTERM / kill -9 tests start
their own local Ray (the user's default path, and what a dying driver takes down with it); the
later CLI calls, whose subject is the DB and the checkpoints, join the module's cluster
(``--address``, the ``cluster`` fixture): a local start is CPU-seconds of Ray daemons and
workers on a machine that runs the other modules beside this one."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import results_db
from contract.provenance import FIELDS
from tests.support.stepfault import env_for

pytestmark = pytest.mark.slow

SWEEP = """\
name: e2e
base:
  model: {preset: tiny}
  train: {steps: 30, batch_size: 4, seq_len: 32, warmup: 2, eval_every: 0, eval_batches: 1,
          log_every: 5, checkpoint_every: 10}
  eval: {probes: [attention_sink]}
variants:
  baseline: {}
  sdpa: {gate.position: G1}
  broken: {train.weight_decay: 0.05}
seeds: [0]
resources: {cpus: 1}
retries: 0
"""

LONG = SWEEP.replace("name: e2e", "name: e2e-long").replace("steps: 30", "steps: 3000") \
    .replace("  broken: {train.weight_decay: 0.05}\n", "")
# The run that fails: update 25 of its first attempt raises (tests/support/stepfault.py, armed
# in every process the CLI starts, Ray's trials included); an attempt that resumes goes on.
BROKEN, FAIL_AT = "broken-s0", 25


def env(**extra: str) -> dict[str, str]:
    e = dict(os.environ)
    e.update(GATESWEEP_HEARTBEAT_S="1", GATESWEEP_FLUSH_S="1", PYTHONUNBUFFERED="1", **extra)
    e.pop("RAY_ADDRESS", None)
    return env_for(BROKEN, FAIL_AT, e)


@pytest.fixture(scope="module")
def _armed_env() -> Iterator[None]:
    """This process's environment armed like env()'s, while the module's cluster lives: the
    cluster's workers inherit it from its raylet, so the fault fires in a joined submit's
    trials too (the driver passes PYTHONPATH to them, not GATESWEEP_TEST_FAIL_AT)."""
    saved = dict(os.environ)
    os.environ.update(env_for(BROKEN, FAIL_AT, dict(os.environ)))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def cluster(_armed_env: None, ray_local: str) -> str:
    """The module's local Ray (its GCS address), its trials armed with the injected fault."""
    return ray_local


def cli(*args: str, timeout: float = 400, cwd: Path | None = None, **extra: str
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orchestrator", *map(str, args)],
                          env=env(**extra), capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def start_long_submit(tmp_path: Path) -> tuple[str, subprocess.Popen[bytes]]:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = tmp_path / "long.yaml"
    spec.write_text(LONG)
    log = open(tmp_path / "submit.log", "wb")  # noqa: SIM115 - the process holds it
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "submit", str(spec), "--db",
                             url, "--storage", str(tmp_path / "runs")], env=env(),
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    return url, proc


def test_sigterm_stops_the_sweep_and_marks_runs_cancelled(tmp_path: Path) -> None:
    url, proc = start_long_submit(tmp_path)
    try:
        db = _wait_for_running(url, proc, timeout=300)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=120) == 130
        statuses = db.runs()["status"].to_list()
        assert statuses and set(statuses) == {"cancelled"}, statuses
        attempts = [a for i in db.runs()["id"].to_list() for a in db.attempts(int(i))]
        assert attempts and all(a.status == "cancelled" and a.ended for a in attempts)
    finally:
        _kill_group(proc)


def test_killed_submit_leaves_no_running_run(tmp_path: Path) -> None:
    """kill -9 of the driver: within a few heartbeat intervals (1 s here) `status` flags its
    running run stale, the reconciler (what the next submit/rerun runs first) marks it lost
    with fault no_heartbeat, and its never-started runs are left to `rerun --sweep` (their
    driver's lease ran out)."""
    from orchestrator.run.driver.rerun import sweep_rerun_plan

    before = set(Path("/tmp").glob("gsray*"))
    url, proc = start_long_submit(tmp_path)
    try:
        db = _wait_for_running(url, proc, timeout=300)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(8)  # past 3 beats + 2 s of the 1 s heartbeat, even if a worker lingers
        res = cli("status", "--db", url)
        assert res.returncode == 0, res.stderr
        assert "probably lost" in res.stdout, res.stdout
        lost = db.reconcile()  # each attempt's own threshold: no --stale-after needed
        runs = db.runs()
        assert lost and "running" not in runs["status"].to_list(), runs.select("name", "status")
        for rid in lost:
            assert [(a.status, a.fault) for a in db.attempts(rid)] == [("lost", "no_heartbeat")]
        plan = sweep_rerun_plan(db, "e2e-long")
        assert sorted(plan.take) == sorted(int(i) for i in runs["id"].to_list())
    finally:
        _kill_group(proc)
        for leftover in set(Path("/tmp").glob("gsray*")) - before:  # the killed driver's
            shutil.rmtree(leftover, ignore_errors=True)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """The driver's session: Ray processes it started, if any outlived it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_for_running(url: str, proc: subprocess.Popen[bytes], timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:  # its own words say why (CI, 2026-12-03: exit 2)
            log = Path(url.removeprefix("sqlite:///")).parent / "submit.log"
            text = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise AssertionError(f"submit exited ({proc.returncode}) before any run started:\n"
                                 f"{text}")
        if Path(url.removeprefix("sqlite:///")).exists():
            db = results_db.open(url)
            runs = db.runs()
            running = runs.filter(runs["status"] == "running") if runs.height else runs
            if running.height:
                rid = int(running["id"][0])
                pts = db.query(f"SELECT COUNT(*) AS n FROM metrics WHERE run_id = {rid}")
                if pts["n"][0] > 0:  # training, not just starting
                    return db
        time.sleep(1)
    raise AssertionError("no run reached running within the timeout")


def test_failure_rerun_resume_and_cache(cluster: str, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    spec = tmp_path / "e2e.yaml"
    spec.write_text(SWEEP)
    storage = tmp_path / "runs"

    first = cli("submit", spec, "--db", url, "--storage", storage)
    assert first.returncode == 1, first.stdout + first.stderr  # one run failed
    assert "3 to run" in first.stdout
    db = results_db.open(url)
    status = dict(zip(db.runs()["name"].to_list(), db.runs()["status"].to_list()))
    assert status == {"baseline-s0": "succeeded", "sdpa-s0": "succeeded", "broken-s0": "failed"}
    broken = db.run("broken-s0")
    (att,) = db.attempts(broken.id)
    assert att.status == "failed" and "injected failure at step 25" in att.error
    assert "Traceback" in att.traceback and "RuntimeError" in att.traceback
    ckpts = storage / "e2e" / "broken-s0" / "checkpoints"
    assert ckpts.is_dir() and any(ckpts.iterdir())
    # no per-trial Tune files unless asked for (the DB has every metric), and never the
    # TensorBoard logger (its tensorboardX import pulled torch into the driver:
    # orchestrator.run.driver.scheduler.tune_file_loggers)
    assert not list(storage.glob("_tune/*/*/result.json"))
    assert "Failed to fetch metrics" not in first.stdout + first.stderr  # quiet_logs._NO_FILES
    assert not list(storage.glob("_tune/**/events.out.tfevents*"))

    again = cli("rerun", broken.id, "--db", url, "--address", cluster)
    assert again.returncode == 0, again.stdout + again.stderr
    attempts = db.attempts(broken.id)
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    assert db.run(broken.id).status == "succeeded"
    summ = db.summaries(run_ids=[broken.id])
    resumed = summ.filter(summ["name"] == "train/resumed_from_step")["value"][0]
    assert resumed == 20  # the newest checkpoint before the failure at step 25
    steps = db.query(f"SELECT MIN(step) AS lo, MAX(step) AS hi FROM metrics "
                     f"WHERE attempt_id = {attempts[1].id} AND name = 'train/loss'")
    assert steps["lo"][0] > 20 and steps["hi"][0] == 30  # attempt 2 never redid early steps

    third = cli("submit", spec, "--db", url, "--storage", storage, "--address", cluster)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "3 cached, 0 to run" in third.stdout
    assert all(len(db.attempts(i)) == n for i, n in
               zip(db.runs()["id"].to_list(), [1, 1, 2]))

    # provenance: every attempt recorded what produced it, from inside its Ray trial
    prov = db.provenance(sweep="e2e")
    assert prov.height == 4 and set(prov["accelerator"]) == {"cpu"}
    assert prov["code_version"].n_unique() >= 1 and prov["torch"].null_count() == 0
    # a trainer fix lands: sdpa-s0's result is now another code version's (its provenance
    # says so); with cached_by: config_and_code the next submit trains it again from step 0
    sdpa = db.run("sdpa-s0")
    (old,) = db.attempts(sdpa.id)
    doc = prov.filter(prov["attempt_id"] == old.id).select(FIELDS).row(0, named=True)
    other = "0" * 40
    db.record_provenance(sdpa.id, old.id, {**doc, "deepspeed_config": {}, "source": "git",
                                           "git_commit": other, "dirty": False,
                                           "diff_sha256": None, "code_version": other})
    # This submit also takes the embedded defaults: a *relative* SQLite URL and the default
    # ./runs storage (both the files above), which its trials (other processes, whose working
    # directory is the joined cluster's, this process's) must resolve to the same files; and
    # Tune's per-trial files, asked for: one result.json, the one trial it runs.
    spec.write_text(SWEEP + "cached_by: config_and_code\n")
    fourth = cli("submit", spec.name, "--db", "sqlite:///r.db", "--address", cluster,
                 cwd=tmp_path, GATESWEEP_TUNE_FILES="1")
    assert fourth.returncode == 0, fourth.stdout + fourth.stderr
    assert "were trained by other code than" in fourth.stdout
    attempts = db.attempts(sdpa.id)
    assert [a.status for a in attempts] == ["succeeded", "succeeded"]
    arts = db.artifacts(sdpa.id)
    ckpts = arts.filter((arts["attempt_id"] == attempts[1].id) & (arts["kind"] == "checkpoint"))
    assert ckpts.height and all(Path(p).is_relative_to(storage / "e2e" / "sdpa-s0")
                                for p in ckpts["path"].to_list()), ckpts
    assert len(list(storage.glob("_tune/*/*/result.json"))) == 1
    summ = db.summaries(run_ids=[sdpa.id])
    assert summ.filter(summ["name"] == "train/resumed_from_step")["value"][0] == 0
    new = db.provenance(run_ids=[sdpa.id], latest=True)
    assert new["attempt"][0] == 2 and new["code_version"][0] != other

