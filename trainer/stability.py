"""Loss-spike and divergence detection (rules documented here, tested in test_stability.py).

Spike rule (``SpikeDetector``): a finite loss is a spike when at least ``min_history`` finite
losses of the last ``window`` (default 20) steps are known and

    loss > median + max(k_mad * MAD, rel * median)        (k_mad = 4, rel = 0.05)

where MAD is the median absolute deviation of the window. The relative floor keeps a smooth,
almost noise-free curve (MAD ~ 0) from flagging tiny wiggles. (Earlier these were 6 and
0.10: 6 MAD is ~9 sigma of Gaussian noise and 10 % of a loss near 1 is 0.1 nats, so a GPU LR
ladder whose baseline degraded from its best loss reported no spike at all. 4 MAD is ~6 sigma:
still no false alarm in 500 noisy steps, tests/trainer/test_stability.py.) Consecutive flagged
steps are
one spike *event* (``count``): a spike that takes three steps to decay is one spike. Every
finite loss enters the window (spikes included: the median is robust to them). Non-finite
losses are not spikes: they are ignored here and handled by the divergence rule.

Divergence rule (``DivergenceDetector``): the run has diverged when
- the loss is NaN or +-inf (immediately), or
- the loss exceeds ``max(2 * initial, initial + 5)`` for ``patience`` (default 3) consecutive
  steps, where ``initial`` is the first finite loss of the run (near ln(vocab) at init), or
- the run *ran away from its best*: the median of the last ``window`` (20) losses
  exceeds ``best_factor`` (1.5) x the lowest such median seen so far AND exceeds it by more than
  ``best_margin`` (0.5 nats). A trained model whose loss climbs back from 0.9 to 2.2 has lost
  what it learned although it never comes near 2x its initial loss (an H200 LR ladder's
  baseline). The median makes it need ~window/2 bad steps, so one spike never triggers it; the
  margin keeps a loss near 0 from tripping on small absolute changes.

The trainer feeds both detectors every step's loss in order, from its batched device reads
(trainer/stepstats.py): nothing between two reads is missed.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from typing import Any


class SpikeDetector:
    def __init__(self, window: int = 20, k_mad: float = 4.0, rel: float = 0.05,
                 min_history: int = 10) -> None:
        if window < 3 or not 1 <= min_history <= window:
            raise ValueError(f"SpikeDetector: need window >= 3 and 1 <= min_history <= window, "
                             f"got window={window}, min_history={min_history}")
        self.window, self.k_mad, self.rel, self.min_history = window, k_mad, rel, min_history
        self.history: deque[float] = deque(maxlen=window)
        self.count = 0  # spike events
        self.flagged_steps = 0  # steps above the threshold (>= count)
        self._in_spike = False

    def threshold(self) -> float | None:
        """Current spike threshold, or None while the window holds too few losses."""
        if len(self.history) < self.min_history:
            return None
        med = statistics.median(self.history)
        mad = statistics.median(abs(x - med) for x in self.history)
        return med + max(self.k_mad * mad, self.rel * abs(med))

    def update(self, loss: float) -> bool:
        """Feed one step's loss; True when this step is above the spike threshold."""
        if not math.isfinite(loss):
            return False
        limit = self.threshold()
        spike = limit is not None and loss > limit
        if spike:
            self.flagged_steps += 1
            if not self._in_spike:
                self.count += 1
        self._in_spike = spike
        self.history.append(loss)
        return spike

    def state_dict(self) -> dict[str, Any]:
        return {"history": list(self.history), "count": self.count,
                "flagged_steps": self.flagged_steps, "in_spike": self._in_spike}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.history = deque(state["history"], maxlen=self.window)
        self.count = int(state["count"])
        self.flagged_steps = int(state["flagged_steps"])
        self._in_spike = bool(state["in_spike"])


class DivergenceDetector:
    def __init__(self, patience: int = 3, factor: float = 2.0, margin: float = 5.0,
                 window: int = 20, best_factor: float = 1.5, best_margin: float = 0.5) -> None:
        if patience < 1 or window < 3 or best_factor <= 1:
            raise ValueError(f"DivergenceDetector: need patience >= 1, window >= 3, "
                             f"best_factor > 1; got {patience}, {window}, {best_factor}")
        self.patience, self.factor, self.margin = patience, factor, margin
        self.best_factor, self.best_margin = best_factor, best_margin
        self.recent: deque[float] = deque(maxlen=window)
        self.best: float | None = None  # lowest median of a full window so far
        self.initial: float | None = None
        self.over = 0  # consecutive steps above the limit
        self.diverged = False
        self.reason = ""

    def limit(self) -> float | None:
        if self.initial is None:
            return None
        return max(self.factor * self.initial, self.initial + self.margin)

    def update(self, loss: float, step: int) -> bool:
        """Feed one step's loss; True once the run has diverged (sticky)."""
        if self.diverged:
            return True
        if not math.isfinite(loss):
            self.diverged, self.reason = True, f"non-finite loss ({loss}) at step {step}"
            return True
        if self.initial is None:
            self.initial = loss
        limit = self.limit()
        assert limit is not None
        self.over = self.over + 1 if loss > limit else 0
        if self.over >= self.patience:
            self.diverged = True
            self.reason = (f"loss {loss:.3g} above {limit:.3g} (max(2x, +5) of the initial "
                           f"{self.initial:.3g}) for {self.over} steps, at step {step}")
            return True
        return self._ran_away(loss, step)

    def _ran_away(self, loss: float, step: int) -> bool:
        self.recent.append(loss)
        if len(self.recent) < (self.recent.maxlen or 0):
            return False
        med = statistics.median(self.recent)
        self.best = med if self.best is None else min(self.best, med)
        if med > self.best * self.best_factor and med - self.best > self.best_margin:
            self.diverged = True
            self.reason = (f"loss ran away from its best: median of the last "
                           f"{len(self.recent)} steps {med:.3g} vs best {self.best:.3g} "
                           f"(> {self.best_factor}x and > +{self.best_margin}), at step {step}")
        return self.diverged

    def state_dict(self) -> dict[str, Any]:
        return {"initial": self.initial, "over": self.over, "recent": list(self.recent),
                "best": self.best}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.initial = state["initial"]
        self.over = int(state["over"])
        # checkpoints written before the run-away rule have no window: it refills
        self.recent = deque(state.get("recent", []), maxlen=self.recent.maxlen)
        self.best = state.get("best")
