"""One way to wait: poll a probe with backoff until it answers or a deadline passes.

Every wait in spotrun goes through here (no bare sleep loops): `wait_until` and `poll_until`
for a wait that ends at an event or a deadline, `repeat` for a daemon's steady round, `pause`
for a retry's fixed delay. Each takes a Clock; tests hand in a ManualClock, whose sleep moves
its time on at once, to drive a deadline without waiting for it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told, or when slept on (the sleep returns at once)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.slept: list[float] = []  # every sleep asked for, in order

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Backoff:
    first_s: float = 0.1
    factor: float = 1.5
    max_s: float = 2.0
    # When given, the longest delay is asked anew at each step instead of max_s: a poll
    # interval that widens while the process has more to poll (spotrun.control.poll_pace).
    ceiling: Callable[[], float] | None = None

    # Up to this fraction of each delay is taken off at random (many waiters asking the same
    # thing again spread out instead of asking together); 0: none.
    jitter: float = 0.0

    def longest_s(self) -> float:
        return self.ceiling() if self.ceiling is not None else self.max_s

    def delay_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """The pause after the `attempt`-th try (0: the first), jitter taken off by `rng`
        (seed one for a repeatable sequence; None: no jitter)."""
        growth = self.factor ** min(attempt, 64)  # 64: far past any ceiling, never overflows
        delay = min(self.longest_s(), self.first_s * growth)
        if rng is None or self.jitter <= 0:
            return delay
        return delay * (1.0 - min(self.jitter, 1.0) * rng.random())


class WaitTimeout(TimeoutError):
    """The probe never answered in time; `last` holds its last answer."""

    def __init__(self, what: str, timeout_s: float, last: object = None) -> None:
        super().__init__(f"gave up waiting for {what} after {timeout_s:.0f} s")
        self.what = what
        self.timeout_s = timeout_s
        self.last = last


def wait_until(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    backoff: Backoff = Backoff(),
    clock: Clock = SYSTEM_CLOCK,
) -> T:
    """Call `probe` until it returns something other than None/False; return that.

    Raises WaitTimeout when `timeout_s` passes first. The probe is always called at least once,
    and once more at the deadline, so a short timeout never skips the check it exists for.
    """
    deadline = clock.monotonic() + timeout_s
    delay = backoff.first_s
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        remaining = deadline - clock.monotonic()
        if remaining <= 0:
            raise WaitTimeout(what, timeout_s, result)
        clock.sleep(min(delay, remaining))
        delay = min(backoff.longest_s(), delay * backoff.factor)


def poll_until(
    condition: Callable[[], bool],
    *,
    timeout_s: float,
    interval_s: float,
    clock: Clock = SYSTEM_CLOCK,
) -> bool:
    """Check `condition` every `interval_s` until it holds or `timeout_s` passes; whether it
    held. For waits whose timeout is an answer, not an error (a grace period that ran out)."""
    steady = Backoff(first_s=interval_s, factor=1.0, max_s=interval_s)
    try:
        return wait_until(
            lambda: condition() or None, timeout_s=timeout_s, what="", backoff=steady, clock=clock
        )
    except WaitTimeout:
        return False


def repeat(step: Callable[[], bool], *, interval_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
    """Run `step` every `interval_s` while it returns True: a daemon's steady round, which
    ends by its own decision, never at a deadline."""
    while step():
        clock.sleep(interval_s)


def pause(seconds: float, *, clock: Clock = SYSTEM_CLOCK) -> None:
    """Wait a fixed time before trying again (a step that the caller's loop repeats)."""
    clock.sleep(seconds)
