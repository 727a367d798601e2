"""A training fault at a chosen step, injected from outside the product.

``failing_at(step)``: while active, ``trainer.train`` raises ``RuntimeError("injected failure at
step N")`` just before update N -- but only in an attempt that started from scratch, so a
retry or rerun that resumes from a checkpoint goes through (what ``train.fail_at_step`` did
when it was a RunSpec field). ``run`` limits it to the run of that name.

In another process -- a Ray trial of ``orchestrator submit`` -- set ``env_for(run, step)`` in
that process's environment: it puts tests/support/inject/ on PYTHONPATH, whose
``sitecustomize`` calls ``install_from_env()`` at interpreter start-up, which patches
``trainer.train`` when (and only when) the trial imports it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

ENV = "GATESWEEP_TEST_FAIL_AT"  # "RUN_NAME:STEP"
INJECT_DIR = Path(__file__).resolve().parent / "inject"
_TARGET = "trainer.train"


def _patch(module: ModuleType, step: int, run: str | None) -> Callable[[], None]:
    """Wrap ``_Run._train_step`` of ``module``; returns the undo."""
    cls = module._Run
    original = cls._train_step

    def failing(self: Any, s: int) -> Any:
        if s + 1 == step and self.resumed_from == 0 and run in (None, self.spec.name):
            raise RuntimeError(f"injected failure at step {step}")
        return original(self, s)

    cls._train_step = failing
    return lambda: setattr(cls, "_train_step", original)


@contextmanager
def failing_at(step: int, run: str | None = None) -> Iterator[None]:
    """In this process: update ``step`` of a fresh attempt (of run ``run``) raises."""
    import trainer.train

    undo = _patch(trainer.train, step, run)
    try:
        yield
    finally:
        undo()


def env_for(run: str, step: int, env: dict[str, str]) -> dict[str, str]:
    """``env`` plus what makes run ``run`` fail at ``step`` in the processes started with it."""
    path = os.pathsep.join(p for p in (str(INJECT_DIR), env.get("PYTHONPATH", "")) if p)
    return {**env, ENV: f"{run}:{step}", "PYTHONPATH": path}


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds ``trainer.train`` as usual, then patches it right after it executes."""

    def __init__(self, step: int, run: str) -> None:
        self.step, self.run = step, run

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if name != _TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader, step, run = spec.loader, self.step, self.run
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            original_exec(module)
            _patch(module, step, run)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install_from_env() -> None:
    """Called by the sitecustomize at start-up: arm the fault named in ``$ENV``, if any."""
    value = os.environ.get(ENV)
    if not value:
        return
    run, _, step = value.rpartition(":")
    sys.meta_path.insert(0, _PatchOnImport(int(step), run))
