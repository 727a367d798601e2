"""One line, not a page, for a trial's error in the driver's console.

Every attempt's end is recorded in the results DB with its fault class and full traceback
(``orchestrator show RUN``), and the driver's progress lines say when a run failed. Ray would
print the same error again as a multi-page traceback: Tune logs "Trial task failed" with the
exception (a stalled attempt that Tune retries by design printed 48 lines), and Ray's worker
logs "Unhandled error" for a task error nobody fetched (a trial still running when its sweep
stopped). This filter keeps such a record, shortened to its headline and the error's last line.

Without its per-trial files (scheduler.tune_file_loggers, off by default) Tune still reads
every trial's result.json / progress.csv back at the end of ``fit`` and warns once with a
line per trial that has none ("Failed to fetch metrics for 1000 trial(s)"): that record is
dropped, as the files are absent by design and the results DB holds every metric.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

# (logger, what its record starts with) of the records shortened
_NOISY = (("ray.tune.execution.tune_controller", "Trial task failed"),
          ("ray._private.worker", "Unhandled error"))
# (logger, what its record starts with) of the record dropped when the Tune files are off
_NO_FILES = ("ray.tune.analysis.experiment_analysis", "Failed to fetch metrics")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class _OneLine(logging.Filter):
    def __init__(self, starts: str) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        if not msg.startswith(self.starts):
            return True
        exc = record.exc_info[1] if record.exc_info else None
        detail = _last_line(str(exc) if exc is not None else msg.partition(": ")[2])
        head = msg.splitlines()[0] if exc is not None else self.starts
        record.msg = f"{head}: {detail} (recorded in the results DB: orchestrator show RUN)"
        record.args, record.exc_info, record.exc_text = (), None, None
        return True


class _Drop(logging.Filter):
    def __init__(self, starts: str) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.starts)


@contextmanager
def one_line_trial_errors(tune_files: bool = True) -> Iterator[None]:
    """While the driver runs Tune: trial errors in the console as one line each, and no
    warning about Tune files that were never written (``tune_files`` False)."""
    added: list[tuple[logging.Logger, logging.Filter]] = [
        (logging.getLogger(name), _OneLine(starts)) for name, starts in _NOISY]
    if not tune_files:
        added.append((logging.getLogger(_NO_FILES[0]), _Drop(_NO_FILES[1])))
    for logger, f in added:
        logger.addFilter(f)
    try:
        yield
    finally:
        for logger, f in added:
            logger.removeFilter(f)
