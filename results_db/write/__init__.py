"""The write path: sweeps, runs, attempts and their metrics, summaries and provenance.

  store.py         WriterMixin: the writer half of ResultsDB
  claims.py        ClaimMixin: one live attempt per run, enforced by the DB
  prepared.py      the trial's write statements, built once and compiled once per dialect
  multirow.py      one multi-row statement per batch, not one per row
  rollup.py        the metric rollup a downsampled curve reads, kept at ingest
  provenance.py    ProvenanceMixin: what produced each attempt, written and read
  decide_records.py DecideRecordsMixin: a decide: sweep's rule changes, pairs and looks
  sqlite_lock.py   which process holds a SQLite DB's write lock (/proc/locks)

May import: results_db.schema, results_db.engine, .rows, .sqlread, .dberrors,
results_db.analysis (its pure rules), contract. Never the read room.
"""
