"""When a message that could not be sent is tried again: exponential backoff from the first
pause (`notify_retry_first_s`), each pause at most MAX_PAUSE_S, until GIVE_UP_S after it was
queued, when it is given up (its attempts stay in the ledger)."""

from __future__ import annotations

MAX_PAUSE_S = 3600.0  # an hour between tries at most
GIVE_UP_S = 24 * 3600.0  # a day of tries, then the message is given up
FACTOR = 2.0


def pause_s(failed_attempts: int, first_s: float) -> float:
    """The pause after the `failed_attempts`-th failed attempt (1 for the first)."""
    exponent = min(max(failed_attempts - 1, 0), 64)  # 2**64 pauses are long past the cap
    return min(first_s * FACTOR**exponent, MAX_PAUSE_S)


def next_try_at(
    created_at: float, now: float, failed_attempts: int, first_s: float
) -> float | None:
    """When to try again after a failed attempt, or None: give it up."""
    at = now + pause_s(failed_attempts, first_s)
    return None if at > created_at + GIVE_UP_S else at
