"""THE table of ``GATESWEEP_*`` environment variables and the one reader of each.

Every knob is a row (name, kind, bounds, default, what it does, who reads it); a product module
reads one only through :func:`flag`, :func:`seconds`, :func:`seconds_or_none` or :func:`text`,
which take the row's kind, bounds and default from here. A name that is not in the table is a
KeyError, so a knob cannot be read without being documented; docs/cluster.md's table is
:func:`markdown_table` (tests/contract/test_env.py keeps both ways: every name in the code and
docs is a row, every row is read). The CLI calls :func:`check_all` before it prints or changes
anything: a bad value is one ValueError naming the variable, the value and what was expected.

Numbers are ASCII (``float`` takes Arabic-Indic digits, ``1_0`` and surrounding spaces), finite
and bounded: ``nan`` compared false with every bound (a retry loop waiting ``nan`` seconds spun)
and ``1e308`` overflowed ``time.sleep``.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Literal

from contract.states import DEFAULT_HEARTBEAT_S, MAX_SILENT_S

Kind = Literal["flag", "seconds", "text"]
MAX_SECONDS = 1e9  # every duration knob's and --stale-after's upper bound (~31 years)
JOB_SCRIPT = "deploy/slurm/gatesweep.sbatch"  # reads its own knobs, in bash, at the job's start
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", re.ASCII)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Knob:
    name: str
    kind: Kind
    default: bool | float | str | None  # None: unset means "not given" (the reader decides)
    what: str
    reader: str  # the module (or script) that reads it
    low: float = 0.0  # seconds only: the bounds; ``above`` excludes ``low`` itself
    above: bool = False
    high: float = MAX_SECONDS


TABLE: tuple[Knob, ...] = (
    Knob("GATESWEEP_DB", "text", None,
         "the results DB of every command without --db, a URL or SQLite path (checked at "
         "start; unset: results.db in the working directory)",
         "results_db/engine.py"),
    Knob("GATESWEEP_CACHE", "text", "~/.cache/gatesweep",
         "tokenizers and token files, keyed by content", "trainer/tokenizer.py"),
    Knob("GATESWEEP_DB_WAIT_S", "seconds", 300.0,
         "how long a DB outage is ridden out before a write gives up and the sweep stops "
         "(0: do not wait)", "orchestrator/run/health/dbretry.py"),
    Knob("GATESWEEP_HEARTBEAT_S", "seconds", DEFAULT_HEARTBEAT_S,
         "a trial's heartbeat interval; an attempt is stale after 3 missed beats + 2 s",
         "orchestrator/run/trial/trial_job.py", above=True),
    Knob("GATESWEEP_FLUSH_S", "seconds", 5.0,
         "how often a trial writes its buffered metric points (also whenever the buffer fills)",
         "orchestrator/run/driver/scheduler.py", above=True),
    Knob("GATESWEEP_MAX_SILENT_S", "seconds", MAX_SILENT_S,
         "how long a stale attempt whose process still uses CPU counts as starved, not hung",
         "orchestrator/run/health/leases.py"),
    Knob("GATESWEEP_STALE_AFTER", "seconds", None,
         "--stale-after's default: seconds without a heartbeat before a running run counts as "
         "lost (unset: each attempt's own 3 beats + 2 s)", "orchestrator/cli/app.py"),
    Knob("GATESWEEP_RETRY_CODE_ERRORS", "flag", False,
         "retry a run that failed with a code error (a bug, a bad data path), as an OOM or a lost "
         "node is (read by the driver; each trial's job carries it to its node)",
         "orchestrator/run/health/faults.py"),
    Knob("GATESWEEP_REUSE_ACTORS", "flag", True,
         "reuse trial processes between runs (skips a worker start and the torch import)",
         "orchestrator/run/driver/scheduler.py"),
    Knob("GATESWEEP_TUNE_FILES", "flag", False,
         "write Tune's result.json and progress.csv per trial (the DB holds the same)",
         "orchestrator/run/driver/scheduler.py"),
    Knob("GATESWEEP_KEEP_RAY_TMP", "flag", False,
         "keep a local Ray's temp folder (logs) after the sweep",
         "orchestrator/run/driver/scheduler.py"),
    Knob("GATESWEEP_DASHBOARD_IDLE_S", "seconds", 15.0,
         "how often a dashboard page with no active run rechecks the DB (a submit or rerun from "
         "the CLI shows up within it; active runs: every 3 s)", "dashboard/views/common.py",
         low=1.0),
    Knob("GATESWEEP_JOB_PYTHON", "text", "python",
         "the cluster's interpreter for `submit --detach` jobs", "orchestrator/cli/detach.py"),
    Knob("GATESWEEP_STORAGE", "text", "/shared/gatesweep",
         "the Slurm job's --storage, the same path on every node", JOB_SCRIPT),
    Knob("GATESWEEP_PYTHON", "text", "python",
         "the interpreter gatesweep and Ray are installed in, on the Slurm nodes", JOB_SCRIPT),
    Knob("GATESWEEP_RAY_WAIT_S", "seconds", 300.0,
         "how long the Slurm job waits for its Ray nodes to join (whole seconds)", JOB_SCRIPT),
    Knob("GATESWEEP_RAY_HEAD_ARGS", "text", "",
         "extra `ray start` options for the Slurm job's head node", JOB_SCRIPT),
    Knob("GATESWEEP_RAY_WORKER_ARGS", "text", "",
         "extra `ray start` options for the Slurm job's other nodes", JOB_SCRIPT),
)
KNOBS = {k.name: k for k in TABLE}


def _raw(name: str, kind: Kind) -> tuple[Knob, str | None]:
    """The row (KeyError for a name the table lacks) and the value; '' counts as unset."""
    knob = KNOBS[name]
    if knob.kind != kind:
        raise TypeError(f"{name} is a {knob.kind} knob, read as {kind}")
    return knob, os.environ.get(name) or None


def _refuse(name: str, raw: str, expected: str) -> ValueError:
    return ValueError(f"environment variable {name}={raw!r}: expected {expected}")


def flag(name: str) -> bool:
    """1/true/yes/on or 0/false/no/off (any case); unset or '' -> the row's default."""
    knob, raw = _raw(name, "flag")
    if raw is None:
        return bool(knob.default)
    word = raw.strip().lower()
    if word not in _TRUE + _FALSE:
        raise _refuse(name, raw, "1 or 0 (or true/false, yes/no, on/off)")
    return word in _TRUE


def seconds_or_none(name: str) -> float | None:
    """A finite ASCII number within the row's bounds; unset or '' -> the row's default."""
    knob, raw = _raw(name, "seconds")
    if raw is None:
        return None if knob.default is None else float(knob.default)
    value = float(raw) if _NUMBER.fullmatch(raw) else math.nan
    low_ok = value > knob.low if knob.above else value >= knob.low
    if not (math.isfinite(value) and low_ok and value <= knob.high):
        raise _refuse(name, raw, f"a number of seconds {_range(knob)}, in ASCII digits")
    return value


def seconds(name: str) -> float:
    """:func:`seconds_or_none` of a row that has a default."""
    value = seconds_or_none(name)
    if value is None:
        raise TypeError(f"{name} has no default; read it with seconds_or_none")
    return value


def text(name: str) -> str:
    """The value as given; unset or '' -> the row's default, or '' for a row without one (its
    reader's own default applies). The reader checks what the text means."""
    knob, raw = _raw(name, "text")
    if raw is not None:
        return raw
    return "" if knob.default is None else str(knob.default)


def check_all() -> None:
    """Read every knob this package's processes read (not the job script's): the first bad
    value raises its one-line ValueError."""
    read = {"flag": flag, "seconds": seconds_or_none, "text": text}
    for knob in TABLE:
        if knob.reader != JOB_SCRIPT:
            read[knob.kind](knob.name)


def _bounds(knob: Knob) -> str:
    if knob.kind == "flag":
        return "1/0 (true/false, yes/no, on/off)"
    if knob.kind == "text":
        return "text"
    if knob.reader == JOB_SCRIPT:
        return "whole number"
    return _range(knob)


def _range(knob: Knob) -> str:
    """'>= 0 and <= 1e9' (1e9, not Python's 1e+09)."""
    low, high = (f"{x:g}".replace("e+0", "e").replace("e+", "e") for x in (knob.low, knob.high))
    return f"{'>' if knob.above else '>='} {low} and <= {high}"


def markdown_table() -> str:
    """The table docs/cluster.md shows (a test compares it with the doc)."""
    rows = ["| variable | kind | accepted | default | what it does | read by |",
            "|---|---|---|---|---|---|"]
    for k in TABLE:
        default = "unset" if k.default is None else (
            ("1" if k.default else "0") if isinstance(k.default, bool) else
            f"{k.default:g} s" if isinstance(k.default, float) else k.default or "empty")
        rows.append(f"| `{k.name}` | {k.kind} | {_bounds(k)} | {default} | {k.what} | "
                    f"{k.reader} |")
    return "\n".join(rows) + "\n"
