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


def test_a_run_that_climbs_back_from_its_best_diverges() -> None:
    """Loss 0.9 -> 2.2 never nears 2x the initial ~9, yet the model lost its training."""
    det = DivergenceDetector()
    learned = [9.0 * math.exp(-i / 40) + 0.9 for i in range(300)]  # settles near 0.9
    climb = [0.9 + 1.3 * min(1.0, i / 100) for i in range(200)]  # back up to 2.2
    steps = [i for i, x in enumerate(learned + climb, start=1) if det.update(x, i)]
    assert det.diverged and "ran away from its best" in det.reason
    first = steps[0]
    assert 300 < first < 400  # during the climb, not at its very start
    assert det.best == pytest.approx(0.9 + 9.0 * math.exp(-280 / 40), abs=0.05)


def test_noisy_training_and_one_spike_never_count_as_running_away() -> None:
    det = DivergenceDetector()
    series = noisy_decay(500, 0.3, seed=5)  # heavy noise around 3..5
    series[250] = 12.0  # one big spike: the window median shrugs it off
    assert not any(det.update(x, i) for i, x in enumerate(series, start=1))


def test_the_run_away_window_round_trips_and_old_states_load() -> None:
    a = DivergenceDetector(window=4)
    for i, x in enumerate([1.0, 1.0, 1.0, 1.0], start=1):
        a.update(x, i)
    b = DivergenceDetector(window=4)
    b.load_state_dict(a.state_dict())
    assert b.best == 1.0 and list(b.recent) == [1.0] * 4
    old = DivergenceDetector()
    old.load_state_dict({"initial": 5.0, "over": 0})  # a checkpoint from before the rule
    assert old.best is None and not old.update(5.0, 1)
