"""The one wait helper, driven by a clock the test moves (no real time passes)."""

from __future__ import annotations

import math

import pytest

from spotrun.core.waiting import (
    Backoff,
    ManualClock,
    WaitTimeout,
    pause,
    poll_until,
    repeat,
    wait_until,
)


def test_wait_until_backs_off_and_checks_once_more_at_the_deadline() -> None:
    clock = ManualClock()
    calls: list[float] = []

    def probe() -> None:
        calls.append(clock.monotonic())

    with pytest.raises(WaitTimeout, match="gave up waiting for the thing after 10 s"):
        wait_until(probe, timeout_s=10, what="the thing", backoff=Backoff(1, 2, 4), clock=clock)
    assert clock.slept == [1, 2, 4, 3]  # the last sleep ends at the deadline
    assert calls == [0, 1, 3, 7, 10]


def test_an_unbounded_wait_ends_at_its_answer() -> None:
    clock = ManualClock()
    answers = iter([None, None, None, "done"])
    found = wait_until(
        lambda: next(answers),
        timeout_s=math.inf,
        what="an answer",
        backoff=Backoff(0.1, 2.0, 0.3),
        clock=clock,
    )
    assert found == "done" and clock.slept == pytest.approx([0.1, 0.2, 0.3])


def test_poll_repeat_and_pause() -> None:
    clock = ManualClock()
    assert not poll_until(lambda: False, timeout_s=1.0, interval_s=0.25, clock=clock)
    assert clock.monotonic() == 1.0
    assert poll_until(lambda: True, timeout_s=0.0, interval_s=0.25, clock=clock)
    rounds = iter([True, True, False])
    clock = ManualClock()
    repeat(lambda: next(rounds), interval_s=5.0, clock=clock)
    assert clock.slept == [5.0, 5.0]
    pause(2.0, clock=clock)
    assert clock.monotonic() == 12.0


def test_a_moving_ceiling_is_asked_at_every_step() -> None:
    clock = ManualClock()
    ceilings = iter([1.0, 1.0, 4.0, 4.0, 4.0, 0.5, 0.5])
    rounds = iter([None] * 7 + ["done"])
    backoff = Backoff(first_s=0.25, factor=2.0, ceiling=lambda: next(ceilings))
    assert (
        wait_until(lambda: next(rounds), timeout_s=math.inf, what="x", backoff=backoff, clock=clock)
        == "done"
    )
    # 0.25, then min(ceiling, doubled): 0.5, 1 (held at 1), 2, 4 (widened), then cut to 0.5
    assert clock.slept == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 0.5]
