"""The Alembic migrations of the results schema (driven by results_db/schema/migrate.py).

  env.py    the Alembic environment, configured in code (no alembic.ini)
  views.py  SQL of the views ``run_summary`` and ``leaderboard``
  versions/ the revisions (not a package: Alembic loads them by path)
"""
