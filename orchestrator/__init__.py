"""gatesweep's orchestrator: sweep YAML -> runs in the results DB -> Ray Tune trials.

Three rooms, one job each; imports run one way, ``cli -> run -> sweep`` (tests/test_architecture.py
holds the floors), and every room may import contract, trainer and results_db below it:

  sweep/  file -> validated, expanded Plan of RunSpecs. No Ray, no DB writes, no torch.
  run/    a Plan's runs -> DB rows -> Ray Tune trials -> attempts: submit, scheduler, the trial
          function, the DB-backed Reporter, leases and claims, fault classification, rerun.
  cli/    the ``orchestrator`` command: parses arguments, calls sweep/ and run/ and
          results_db, formats what they return. Nothing below it imports it.
  __main__.py  ``python -m orchestrator``: the console script.
"""
