"""Running: a Plan's runs -> results-DB rows -> Ray Tune trials -> attempts.

Three rooms, each importing only those below it (tests/test_architecture.py):

  driver/          submit, schedule, rerun and watch a sweep (the driver process)
  trial/           one attempt inside a Tune trial, and the callback that tracks trials
  health/          leases, liveness, DB outages and fault kinds
  cluster.py       host labels, trial placement, concurrency and the storage path
  env.py           the process environment for Ray and the DeepSpeed trials

cluster.py and env.py are the floor every room stands on; they import no room.
May import: orchestrator.sweep, contract, trainer, results_db. Never imports orchestrator.cli.
"""
