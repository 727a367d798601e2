"""Per-step training statistics kept on the device and read back in batches.

Reading a loss or a grad norm back to the host (``float(t)``, ``.item()``, ``.cpu()``) waits for
the device to finish everything queued so far: done every step, the CPU can never run ahead
and the GPU idles while Python launches the next step's kernels. ``StepStats`` keeps each step's
``(loss, CE loss, pre-clip grad norm)`` as a device tensor and reads all of them in ONE transfer
at the trainer's read points (log steps, evaluation, checkpoints, the end, a stop request). The
detectors (trainer/stability.py) then see *every* step's values in order, so a spike or a
non-finite loss between two reads is never missed, only noticed up to ``log_every`` steps later.

``Window`` measures training throughput between reads: the device is synchronised at a read,
so wall time from one read to the next is true step time (a per-step timer would only measure
how fast the CPU queues kernels).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as tdist


@dataclass(frozen=True)
class StepRow:
    step: int  # the state after this many optimizer updates
    loss: float  # optimised (total) loss, mean over micro-batches and ranks
    ce: float  # language-modelling cross-entropy, same averaging
    grad_norm: float  # pre-clip global L2 norm


class StepStats:
    def __init__(self, world: int = 1) -> None:
        self.world = world
        self._steps: list[int] = []
        self._rows: list[torch.Tensor] = []  # each (3,) on the device

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, step: int, row: torch.Tensor) -> None:
        self._steps.append(step)
        self._rows.append(row)

    def read(self) -> list[StepRow]:
        """All pending rows, oldest first (collective when world > 1: every rank reads at the
        same steps, which the trainer's deterministic read points guarantee)."""
        if not self._rows:
            return []
        stacked = torch.stack(self._rows)  # (k, 3)
        if self.world > 1:  # losses: mean over ranks; the grad norm is already global
            losses = stacked[:, :2].contiguous()
            tdist.all_reduce(losses)
            stacked = torch.cat([losses / self.world, stacked[:, 2:]], dim=1)
        values = stacked.cpu().tolist()  # the one host sync of the batch
        rows = [StepRow(s, *v) for s, v in zip(self._steps, values, strict=True)]
        self._steps, self._rows = [], []
        return rows


@dataclass
class Window:
    """Training seconds and steps since the last ``train/tokens_per_s`` report."""

    seconds: float = 0.0
    steps: int = 0
    started: float = field(default_factory=time.perf_counter)

    def restart(self) -> None:
        """Start timing training again (after a read, an evaluation or a checkpoint)."""
        self.started = time.perf_counter()

    def close_segment(self) -> None:
        """Add the training time since ``restart`` (call right after a synchronising read)."""
        self.seconds += time.perf_counter() - self.started

    def take(self, tokens_per_step: int) -> float:
        """Tokens per second over the window, then reset it."""
        rate = self.steps * tokens_per_step / max(self.seconds, 1e-9)
        self.seconds, self.steps = 0.0, 0
        return rate
