"""Durations as a user types them: `90s`, `30m`, `2h`, `1.5h`, a bare number of seconds, or
`never` (0: the thing never happens). The one parser of them, with an error that says what is
accepted."""

from __future__ import annotations

import re

from spotrun.core.errors import UsageError

NEVER = 0.0
# The longest wait or timeout spotrun takes: longer is a typo, and a time that far ahead
# overflows the dates it becomes (a tag's expiry, a deadline).
MAX_SECONDS = 366 * 86400.0
MAX_HOURS = MAX_SECONDS / 3600
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(?P<number>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>[smh]?)")


def parse_duration(text: str, *, what: str = "duration") -> float:
    """Seconds in `text` ("90s", "30m", "2h", "45" = 45 s); `never` -> 0.0 (NEVER)."""
    word = text.strip().lower()
    if word == "never":
        return NEVER
    match = _DURATION.fullmatch(word)
    if match is None:
        raise UsageError(
            f"{what} {text!r} is not a duration",
            hint="give a number with s, m or h (90s, 30m, 2h), or never",
        )
    seconds = float(match["number"]) * _UNITS[match["unit"] or "s"]
    if seconds <= 0:
        raise UsageError(
            f"{what} {text!r} is no time at all", hint="give a positive duration, or never"
        )
    if seconds > MAX_SECONDS:
        raise UsageError(
            f"{what} {text!r} is more than a year", hint="give at most 366 days (8784h), or never"
        )
    return seconds


def format_duration(seconds: float) -> str:
    """A duration as parse_duration reads it back: 0 -> never, 1800 -> 30m, 90 -> 90s."""
    if seconds <= 0:
        return "never"
    for unit, size in (("h", 3600.0), ("m", 60.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"


def show_duration(seconds: float) -> str:
    """A duration for people, the one way every view prints one: 12.3s, 4m05s, 14h58m, 3d04h."""
    if seconds < 60:
        return f"{max(0.0, seconds):.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"
