"""gatesweep's contract: the lowest floor of the import graph (pydantic + stdlib, never torch).

Every other package imports it; it imports none of them. What lives here is what two or more
packages must agree on:

- ``config``: RunSpec / GateSpec / ModelConfig and the rest of the run contract (frozen, validated)
- ``presets``: named model sizes; ``params`` / ``gate_shapes``: shape and parameter arithmetic
- ``metrics``: the metric vocabulary; ``reporter``: the Reporter protocol the trainer calls
- ``states``: run states, fault classes and their groups
- ``yamlsrc`` / ``errors``: THE bounded YAML reader (sweep files and run files) and its errors
- ``splits``: the held-out split rule shared by validation and the trainer
- ``textout``: the escapes of user/DB text for terminals, Markdown, LaTeX and CSV (CLI + dashboard)
"""
