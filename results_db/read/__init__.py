"""The read path: polars frames over the read-only engine.

  query.py         ReaderMixin: the reader half of ResultsDB (and the user's SQL door)
  downsample.py    the SQL behind ``db.metrics``: whole or downsampled series
  frames.py        the reads behind results_db/analysis: runs with their metrics, wide
  live.py          LiveMixin: runs in flight (step, loss, tokens/s, ETA, heartbeat, holder)
  grouping.py      runs grouped by any config key (the Explore page's "group by")
  decide_path.py   how each row of a ``decide:`` sweep narrowed, seed by seed
  pgstat.py        who holds connections to a PostgreSQL results DB (pg_stat_activity)

May import: results_db.write (the rollup's layout), results_db.schema, results_db.engine,
.rows, .sqlread, .dberrors, results_db.analysis (its pure rules), contract.
"""
