"""`python -m orchestrator ARGS` in a real process that starts at fork cost.

A fresh interpreter spends ~1.1 CPU-s importing the CLI before it reads its first argument;
for a malformed-input case that is nearly all of its cost (~70 such processes were 81 s of the
default test run). Here each call is a process of its own, forked from a server that has
imported ``orchestrator.cli.main`` (tests/support/procs.py's clean_context): its own address
space, rlimits, working directory, environment, stdout, stderr and exit code, and nothing left
over from an earlier call. It then runs ``orchestrator``'s ``__main__`` as ``python -m`` does
(runpy: ``sys.argv[0]`` is the module's file), runs the ``atexit`` handlers a normal exit runs,
and exits with the code. An uncaught exception prints its traceback on stderr and exits 1, as
the interpreter's top level does. A call past its timeout is killed and raises
``subprocess.TimeoutExpired``, as ``subprocess.run`` does.

One forkserver serves every ``clean_context`` of a pytest worker; it preloads the CLI whichever
module starts it (procs.SERVER_PRELOAD).
"""

from __future__ import annotations

import atexit
import os
import resource
import runpy
import subprocess
import sys
import tempfile
from functools import lru_cache
from multiprocessing.context import ForkServerContext
from pathlib import Path

from tests.support.procs import clean_context

ARGV0 = "orchestrator"  # what the returned CompletedProcess's args start with


@lru_cache(maxsize=1)
def _context() -> ForkServerContext:
    return clean_context()


def _child(args: list[str], env: dict[str, str], cwd: str, out: str, err: str,
           address_space: int | None) -> None:
    if address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = [ARGV0, *args]  # runpy puts the module's file in argv[0], as `python -m` does
    code: int | str | None = 0
    try:
        runpy.run_module("orchestrator", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        code = stop.code
    finally:
        atexit._run_exitfuncs()  # the forkserver child ends in os._exit, which skips them
    raise SystemExit(code)


def run(*args: str, timeout: float, env: dict[str, str] | None = None,
        cwd: str | Path | None = None, address_space: int | None = None
        ) -> subprocess.CompletedProcess[str]:
    """``orchestrator *args`` with ``env`` (default: this process's environment), in ``cwd``,
    under an RLIMIT_AS of ``address_space`` bytes; stdout and stderr as text."""
    with tempfile.TemporaryDirectory(prefix="gscli") as tmp:
        out, err = Path(tmp, "out"), Path(tmp, "err")
        out.touch()
        err.touch()
        proc = _context().Process(target=_child, args=(
            list(args), dict(os.environ if env is None else env), str(cwd or os.getcwd()),
            str(out), str(err), address_space))
        proc.start()
        proc.join(timeout)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
            raise subprocess.TimeoutExpired([ARGV0, *args], timeout, out.read_bytes(),
                                            err.read_bytes())
        return subprocess.CompletedProcess([ARGV0, *args], proc.exitcode,
                                           out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))
