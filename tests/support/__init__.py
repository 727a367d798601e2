"""Test scaffolding, kept out of the product packages: the one builder of synthetic
results DBs (synthdb.py: runs registered by the real submit path, attempts played through the
writer API) and its scenarios (synth.py, dashboard_sample.py), faults injected from outside
(stepfault.py: a training step; dbfaults.py: a full or read-only disk), a concurrent-writer
load generator (loadgen.py), a throwaway PostgreSQL server (pgtemp.py), a throwaway
single-host Slurm cluster (slurm.py), `python -m orchestrator` at fork cost (cliproc.py),
where a test run's time went (timeline.py), a free port for a test's server (ports.py).
Imported by tests and benchmarks (``python -m benchmarks.X`` runs from the repository root,
where ``tests`` is importable)."""
