"""The ``orchestrator`` command line: parse, call orchestrator.sweep / orchestrator.run /
results_db, format. main.py holds the writing commands and ``main``; read.py the read-only ones;
results.py leaderboard/table/effects/factorial/stability/scaling; findings.py ``findings`` (the
study's answers first); evaluate.py ``eval``; detach.py
``submit --detach`` (Ray Jobs client) with jobs.py as that job's entrypoint; report.py ``report``
(runs dashboard.report); app.py the Typer app and shared options; frame_format.py and outfiles.py
how frames reach the terminal and files; memlimit.py the address-space limit (``ulimit -v``) said
in words.

May import everything below it; nothing in the project imports it but ``__main__`` and the
dashboard never does.
"""
