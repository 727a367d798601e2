"""Test scaffolding, kept out of the product packages (issue 19): synthetic results DBs written
through the real writer API (synth.py, dashboard_sample.py), a concurrent-writer load generator
(loadgen.py), a throwaway PostgreSQL server (pgtemp.py). Imported by tests and benchmarks
(``python -m benchmarks.X`` runs from the repository root, where ``tests`` is importable)."""
