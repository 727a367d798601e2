"""gatesweep's trainer: ``from trainer import train, TrainResult, Preempted`` (trainer/train.py).

The exports are lazy so that ``import trainer.config`` (the orchestrator's spec parsing) does
not pay for importing torch. ``trainer.train`` is the *function*: the package keeps it even
after the submodule of the same name is imported (reach the module through
``sys.modules["trainer.train"]`` or ``from trainer.train import ...``).
"""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["train", "TrainResult", "Preempted"]


class _Package(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name == "Preempted":  # no torch import: callers catch it without training
            from trainer.preempt import Preempted

            return Preempted
        if name in __all__:
            from trainer.train import TrainResult, train

            return {"train": train, "TrainResult": TrainResult}[name]
        raise AttributeError(f"module 'trainer' has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        # The import system sets ``trainer.train = <submodule>`` once the submodule has
        # loaded; keep the function the package promises instead.
        if name == "train" and isinstance(value, types.ModuleType):
            value = value.train
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
