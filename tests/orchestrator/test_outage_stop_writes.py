"""After a driver gives up on its results DB, no trial writes a metric point.

PostgreSQL is really stopped under a training sweep (GATESWEEP_DB_WAIT_S=10) and started again
the moment the driver stops the sweep, or a few seconds after. A trial whose flush was waiting
for the DB then used to write its buffered steps, and train and write on, for seconds after the
stop. Each metric row here is stamped by the server when it is written (a trigger the test adds:
the product's rows carry no time), and the stop moment is when the driver's stop flag appears in
the cluster's key-value store (orchestrator/run/trial/sweep_stop.py), seen by polling it, or
the driver's line that it records the stop, if that comes first (Tune ended on its own: every
trial had given up on the DB). Nothing
can be written while the server is down, so every row must predate the stop -- and the sweep
must still end the documented way (exit 2, no run left ``running``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

import results_db

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

CLI = Path(sys.executable).parent / "orchestrator"
WAIT_S = 10
STOPPING = "recording the stopped sweep"  # the driver's line as it starts recording the stop
SWEEP = """\
name: stopw
base:
  model: {preset: tiny}
  train: {steps: 100000, batch_size: 2, seq_len: 16, warmup: 1, eval_every: 0, log_every: 5,
          checkpoint_every: 200}
variants:
  a: {train.lr: 0.001}
  b: {train.lr: 0.002}
seeds: [0]
resources: {cpus: 1}
"""
# Every metric row gets the server's wall clock when it is inserted or updated.
STAMP = ["ALTER TABLE metrics ADD COLUMN written_at timestamptz",
         """CREATE FUNCTION stamp_written() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN NEW.written_at := clock_timestamp(); RETURN NEW; END $$""",
         """CREATE TRIGGER stamp_written BEFORE INSERT OR UPDATE ON metrics
            FOR EACH ROW EXECUTE FUNCTION stamp_written()"""]


def _stop_flags() -> list[bytes]:
    from ray.experimental import internal_kv

    return internal_kv._internal_kv_list("stopped:", namespace="gatesweep")


def _newest_write(url: str) -> tuple[datetime | None, dict[int, int]]:
    """(the newest metric row's write time, the highest step per run)."""
    eng = sa.create_engine(url)
    try:
        with eng.connect() as c:
            newest = c.execute(sa.text("SELECT max(written_at) FROM metrics")).scalar()
            steps = dict(c.execute(sa.text("SELECT run_id, max(step) FROM metrics "
                                           "GROUP BY run_id")).tuples().all())
    finally:
        eng.dispose()
    return newest, steps


# Back at the stop: the race that wrote rows before the reporter asked the stop flag (2 of 3
# runs). Back later is the documented outage end tests/e2e/test_db_outage_end.py already runs;
# a second case here cost 45 s of make test for no other path.
@pytest.mark.parametrize("back_after_s", [0.0])
def test_no_trial_writes_after_the_driver_gives_up(
        back_after_s: float, ray_local: str, tmp_path: Path) -> None:
    from tests.outage_fixtures import outage

    before = set(_stop_flags())
    with outage("postgres") as o:
        results_db.open(o.url).close()  # the schema, then the stamp on top of it
        eng = sa.create_engine(o.url)
        with eng.begin() as c:
            for stmt in STAMP:
                c.execute(sa.text(stmt))
        eng.dispose()
        sweep = tmp_path / "stopw.yaml"
        sweep.write_text(SWEEP)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        env.update(GATESWEEP_DB_WAIT_S=str(WAIT_S), GATESWEEP_HEARTBEAT_S="1",
                   PYTHONUNBUFFERED="1")
        env.pop("GATESWEEP_FLUSH_S", None)  # the default flush (5 s), as a user has it
        log = tmp_path / "submit.log"
        with open(log, "w") as f:
            proc = subprocess.Popen([str(CLI), "submit", str(sweep), "--db", o.url,
                                     "--storage", str(tmp_path / "runs"), "--address",
                                     ray_local], env=env, stdout=f, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while len(_newest_write(o.url)[1]) < 2:  # both runs train and have flushed
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(1)
            o.down()
            down_at = datetime.now(UTC)
            # the stop moment: the driver's flag appears (its stopper told Tune to stop), or
            # it says it records the stop (Tune had ended: every trial gave up by itself)
            while not (set(_stop_flags()) - before or STOPPING in log.read_text()):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.02)
            stop_at = datetime.now(UTC)
            time.sleep(back_after_s)
            o.up()
            code = proc.wait(timeout=300)
            time.sleep(12)  # a straggler would flush within its 5 s interval
            newest, steps = _newest_write(o.url)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
        text = log.read_text()
        assert newest is not None and newest < down_at, (newest, down_at, stop_at, steps, text)
        assert code == 2 and "Traceback" not in text, text
        states = {r["name"]: r["status"] for r in
                  results_db.open(o.url).runs().iter_rows(named=True)}
        assert "running" not in states.values(), (states, text)
