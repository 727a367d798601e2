"""trainer/schedule.py: warmup + cosine/linear/constant values at known steps."""

from __future__ import annotations

import pytest

from contract.config import TrainConfig
from trainer.schedule import lr_at


def cfg(**kw: object) -> TrainConfig:
    base = dict(steps=101, lr=1.0, min_lr=0.1, warmup=10, schedule="cosine")
    return TrainConfig(**{**base, **kw})


def test_warmup_is_linear_and_reaches_the_peak() -> None:
    c = cfg()
    assert [lr_at(s, c) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0])


def test_cosine_midpoint_and_end() -> None:
    c = cfg()  # decay over steps 10..100 (90 intervals)
    assert lr_at(10, c) == pytest.approx(1.0)
    assert lr_at(55, c) == pytest.approx(0.55)  # halfway: (1 + 0.1) / 2
    assert lr_at(100, c) == pytest.approx(0.1)
    assert lr_at(500, c) == pytest.approx(0.1)  # past the end: stays at min_lr


def test_cosine_at_a_third() -> None:
    # progress 30/90 = 1/3: cos(pi/3) = 0.5, so 0.1 + 0.9 * 0.75
    assert lr_at(40, cfg()) == pytest.approx(0.775)


def test_linear_and_constant() -> None:
    lin = cfg(schedule="linear")
    assert [lr_at(s, lin) for s in (10, 55, 100)] == pytest.approx([1.0, 0.55, 0.1])
    const = cfg(schedule="constant")
    assert [lr_at(s, const) for s in (0, 10, 100)] == pytest.approx([0.1, 1.0, 1.0])


def test_default_min_lr_is_a_tenth_and_no_warmup() -> None:
    c = TrainConfig(steps=11, lr=2.0, warmup=0)
    assert lr_at(0, c) == pytest.approx(2.0)
    assert lr_at(10, c) == pytest.approx(0.2)


def test_monotone_decay_after_warmup() -> None:
    c = cfg()
    values = [lr_at(s, c) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_negative_step_is_an_error() -> None:
    with pytest.raises(ValueError, match="step"):
        lr_at(-1, cfg())
