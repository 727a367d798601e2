"""One line, not a page, for a trial's error in the driver's console.

Every attempt's end is recorded in the results DB with its fault class and full traceback
(``orchestrator show RUN``), and the driver's progress lines say when a run failed. Ray would
print the same error again as a multi-page traceback: Tune logs "Trial task failed" with the
exception (a stalled attempt that Tune retries by design printed 48 lines), and Ray's worker
logs "Unhandled error" for a task error nobody fetched (a trial still running when its sweep
stopped). This filter keeps such a record, shortened to its headline and the error's last line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

# (logger, what its record starts with) of the records shortened
_NOISY = (("ray.tune.execution.tune_controller", "Trial task failed"),
          ("ray._private.worker", "Unhandled error"))


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


@contextmanager
def one_line_trial_errors() -> Iterator[None]:
    """While the driver runs Tune: trial errors in the console as one line each."""
    added = [(logging.getLogger(name), _OneLine(starts)) for name, starts in _NOISY]
    for logger, f in added:
        logger.addFilter(f)
    try:
        yield
    finally:
        for logger, f in added:
            logger.removeFilter(f)
