"""gatesweep's orchestrator: sweep YAML -> runs in the results DB -> Ray Tune trials.

One concern per module:
  yamlsrc.py  the one bounded, safe YAML reader (regular files, depth/nodes/tags, lines)
  spec.py     the SweepSpec model (pydantic, extra=forbid) and its checks
  keys.py     the dotted-key scheme (``train.lr``, ``model.gates.0.position``, ``gate.*``)
  expand.py   variants x axes x seeds -> named, validated RunSpecs
  plan.py     file -> Plan (validated, expanded) + data checks; no Ray, no torch
  table.py    the run table of ``validate`` / ``submit --dry-run``
  submit.py   register in the DB (dedupe by fingerprint) and schedule
  scheduler.py  Ray session, Tuner, DB-sync callback, Ctrl-C -> cancelled
  runner.py   the Tune trial function (one attempt per execution)
  reporter.py the DB-backed Reporter (batched writes, heartbeat thread, cancel)
  progress.py live progress from the DB
  rerun.py    rerun_runs / spawn_rerun (also the dashboard's rerun button)
  env.py      environment for Ray/DeepSpeed workers
  cli_app.py  the Typer app and shared options; cli.py (writes + main), cli_read.py (reads),
              cli_results.py (leaderboard/table/effects/stability), frame_format.py (output)
  detach.py   submit --detach (Ray Jobs client); jobs.py the job's entrypoint
"""
