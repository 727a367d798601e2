"""The driver: the process that submits a sweep, runs its Tuner and reports progress.

  submit.py        register a Plan in the DB (dedupe by fingerprint) and schedule it
  adaptive.py      submit for a ``decide:`` sweep: seeds go where a row's verdict is open
  rule_lock.py     a sweep's decide: rule and rows, fixed once it has runs (--change-rule)
  scheduler.py     the Ray session and Tuner (one trial per pending run), Ctrl-C -> cancelled
  rerun.py         rerun_runs / spawn_rerun (also the dashboard's rerun button)
  code_cache.py    what ``cached_by: config_and_code`` re-queues when the code changed
  paths.py         where a command may write or delete run files (inside ``--storage``)
  progress.py      live progress from the DB
  quiet_logs.py    a trial's error as one line in the driver's console (the DB keeps it whole)

May import: orchestrator.run.trial, orchestrator.run.health, orchestrator.run.cluster and .env,
orchestrator.sweep, contract, trainer, results_db.
"""
