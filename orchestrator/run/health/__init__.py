"""Health: is an attempt alive, is the DB reachable, and is a failure worth another attempt.

  leases.py        lease renewal and stale-attempt takeover (the driver's side of claims)
  liveness.py      is a silent attempt's process dead, stopped, hung or only starved (/proc)
  frozen_writer.py SQLite: end our trial that froze inside a write transaction
  dbretry.py       wait out a results-DB outage for a bounded time
  faults.py        exception -> fault kind (retry or not)

May import: orchestrator.run.cluster and .env, contract, results_db. Never the trial or driver.
"""
