"""Sweep planning: a sweep YAML file -> a validated, expanded Plan (no Ray, no torch, no DB writes).

  spec.py            the SweepSpec model (pydantic, extra=forbid) and its checks
  keys.py            the dotted-key scheme (``train.lr``, ``model.gates.0.position``, ``gate.*``)
  gate_shorthand.py  ``gate: G1.elementwise``-style shorthand -> GateSpec fields
  expand.py          variants x axes x seeds -> named, validated RunSpecs
  plan.py            file -> Plan (validated, expanded) + data checks
  decide.py          the ``decide:`` block: add seeds where a row's verdict is still open
  table.py           the run table of ``validate`` / ``submit --dry-run``

May import: contract, trainer.data (torch-free data checks), results_db (read-only lookups), the
standard library and pydantic.
Never imports orchestrator.run or orchestrator.cli.
"""
