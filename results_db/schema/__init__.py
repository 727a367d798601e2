"""The schema: the tables, their migrations' driver, and the names results are stored under.

  tables.py        the results schema as typed SQLAlchemy 2 ORM classes
  migrate.py       creation and upgrades through Alembic, configured in code (no alembic.ini)
  ownership.py     is this database gatesweep's (the rule on SQLite and PostgreSQL)
  vocab.py         the vocabulary of results: dimension columns, gate defaults, verdicts
  dims.py          a run's dimension columns, derived from its config

May import: results_db.dberrors, contract. Never the write or read rooms.
"""
