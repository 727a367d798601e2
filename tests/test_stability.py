"""trainer/stability.py: spike and divergence rules on hand-built loss series."""

from __future__ import annotations

import math
import random

import pytest

from trainer.stability import DivergenceDetector, SpikeDetector


def noisy_decay(n: int, noise: float, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [3.0 + 2.0 * math.exp(-i / 50) + rng.uniform(-noise, noise) for i in range(n)]


def test_a_clear_spike_is_found() -> None:
    det = SpikeDetector()
    series = noisy_decay(60, 0.02)
    series[40] = series[39] * 1.6
    flagged = [i for i, x in enumerate(series) if det.update(x)]
    assert flagged == [40]
    assert det.count == 1


def test_gentle_noise_is_not_flagged() -> None:
    det = SpikeDetector()
    for x in noisy_decay(500, 0.05, seed=3):
        det.update(x)
    assert det.count == 0


def test_a_multi_step_spike_counts_once_and_two_spikes_twice() -> None:
    det = SpikeDetector()
    series = noisy_decay(100, 0.01)
    for i in (30, 31, 32):
        series[i] += 2.0
    series[70] += 2.0
    for x in series:
        det.update(x)
    assert det.count == 2
    assert det.flagged_steps == 4


def test_nothing_flagged_before_min_history() -> None:
    det = SpikeDetector(min_history=10)
    assert not any(det.update(x) for x in [1.0] * 9 + [100.0])
    assert det.threshold() is not None and det.update(100.0)


def test_nan_is_ignored_and_does_not_poison_the_window() -> None:
    det = SpikeDetector()
    series = noisy_decay(30, 0.01)
    for x in series[:20]:
        det.update(x)
    before = det.threshold()
    assert det.update(float("nan")) is False
    assert det.update(float("inf")) is False
    assert det.threshold() == before
    assert det.update(series[20] * 2) is True


def test_spike_state_round_trips() -> None:
    a, b = SpikeDetector(), SpikeDetector()
    series = noisy_decay(40, 0.02)
    series[25] += 3
    for x in series[:30]:
        a.update(x)
    b.load_state_dict(a.state_dict())
    for x in series[30:]:
        assert a.update(x) == b.update(x)
    assert a.state_dict() == b.state_dict() and b.count == 1


def test_divergence_on_nan_is_immediate() -> None:
    det = DivergenceDetector()
    assert det.update(5.5, 1) is False
    assert det.update(float("nan"), 2) is True
    assert "non-finite" in det.reason and det.diverged


def test_runaway_loss_needs_patience_consecutive_steps() -> None:
    det = DivergenceDetector(patience=3)
    det.update(5.0, 1)  # limit = max(10, 10) = 10
    assert det.limit() == pytest.approx(10.0)
    assert not det.update(11.0, 2) and not det.update(11.0, 3)
    assert not det.update(9.0, 4)  # the streak resets
    assert not det.update(12.0, 5) and not det.update(12.0, 6)
    assert det.update(12.0, 7)
    assert "step 7" in det.reason


def test_small_initial_loss_uses_the_additive_margin() -> None:
    det = DivergenceDetector(patience=1)
    det.update(1.0, 1)
    assert det.limit() == pytest.approx(6.0)  # max(2 * 1, 1 + 5)
    assert not det.update(5.9, 2)
    assert det.update(6.1, 3)


def test_divergence_state_round_trips() -> None:
    a = DivergenceDetector(patience=2)
    a.update(5.0, 1)
    a.update(20.0, 2)
    b = DivergenceDetector(patience=2)
    b.load_state_dict(a.state_dict())
    assert b.update(20.0, 3) and a.update(20.0, 3)
