"""Running: a Plan's runs -> results-DB rows -> Ray Tune trials -> attempts.

  submit.py        register a Plan in the DB (dedupe by fingerprint) and schedule it
  scheduler.py     the Ray session and Tuner (one trial per pending run), Ctrl-C -> cancelled
  trial_sync.py    the Tune callback that keeps the DB in step with trial events
  runner.py        the Tune trial function (one attempt per execution)
  multiworker.py   the same for an N-worker Ray Train fit
  trial_job.py     the typed, frozen Job handed to a trial; trial_result.py its outcome
  reporter.py      the DB-backed Reporter (batched writes, heartbeat thread, cancel)
  leases.py        lease renewal and stale-attempt takeover; frozen_writer.py the SQLite lock watch
  liveness.py      is a silent attempt's process dead, stopped, hung or only starved (/proc)
  trial_db.py      one results-DB handle per trial process, kept across its trials
  sweep_stop.py    the driver's "sweep stopped" flag its trials read (Ray's key-value store)
  quiet_logs.py    a trial's error as one line in the driver's console (the DB keeps it whole)
  faults.py        exception -> fault kind (retry or not); dbretry.py waits out DB outages
  sigterm.py       SIGTERM/preemption -> checkpoint and a resumable state
  rerun.py         rerun_runs / spawn_rerun (also the dashboard's rerun button)
  progress.py      live progress from the DB
  cluster.py       host labels and cluster addresses; env.py the workers' environment

May import: orchestrator.sweep, contract, trainer, results_db. Never imports orchestrator.cli.
"""
