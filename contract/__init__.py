"""gatesweep's contract: the lowest floor of the import graph (pydantic + stdlib, never torch).

Every other package imports it; it imports none of them. What lives here is what two or more
packages must agree on:

  config.py            RunSpec / GateSpec / ModelConfig: the run contract (frozen, validated)
  identity.py          the identity rule: fingerprint and seed-group key of one canonical document
  presets.py           named model sizes
  params.py            parameter counts by arithmetic, param matching
  gate_shapes.py       gate score shapes and parameter counts
  flops.py             training FLOPs by arithmetic
  gate_positions.py    THE table of gate positions (what each gates, its heads, its order, labels)
  gate_dims.py         the gate dimension columns of a stored config, and what an unset field means
  dimensions.py        THE table of run dimensions (column, config path, type, gate or not, NULL)
  metrics.py           the metric vocabulary
  analysis_defaults.py what a conclusion is drawn on when the user does not say
  reporter.py          the Reporter protocol the trainer calls
  states.py            run states, fault classes, their groups and staleness
  provenance.py        what produced a result: code, packages and machine of one attempt
  yamlsrc.py           THE bounded YAML reader (sweep files and run files)
  errors.py            user-facing errors located as FILE:LINE KEY
  ids.py               THE rule for reading an integer out of typed or linked text
  splits.py            the held-out split rule shared by validation and the trainer
  textout.py           the escapes of user/DB text for terminals, Markdown, LaTeX and CSV
  child.py             THE command line and environment of every child Python (no working dir)
  env.py               THE table of GATESWEEP_* environment variables and their one reader
"""
