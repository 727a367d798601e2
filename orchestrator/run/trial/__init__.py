"""A trial: one attempt of one run inside a Tune trial process, and the driver's view of it.

  runner.py        the Tune trial function (one attempt per execution)
  multiworker.py   the same for an N-worker Ray Train fit
  reporter.py      the DB-backed Reporter (batched writes, heartbeat thread, cancel)
  trial_job.py     the typed, frozen Job handed to a trial
  trial_result.py  what a trial (or one Ray Train worker) hands back
  trial_sync.py    the driver's Tune callback that keeps the DB in step with trial events
  trial_db.py      one results-DB handle per trial process, kept across its trials
  sweep_stop.py    the driver's "sweep stopped" flag its trials read (Ray's key-value store)
  sigterm.py       SIGTERM/preemption -> checkpoint and a resumable state

May import: orchestrator.run.health, orchestrator.run.cluster and .env, orchestrator.sweep,
contract, trainer, results_db. Never the driver.
"""
