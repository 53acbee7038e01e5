"""`spotrun ls`'s window: every live run, and the ended runs that ended within it (the last
24 h unless `--since` says otherwise); the rest are counted in a footer, listed by `--all`."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from spotrun.core.durations import parse_duration
from spotrun.core.errors import UsageError
from spotrun.store.run_records import RunRecord

RECENT_S = 24 * 3600.0  # what `ls` calls recent
_DAY_S = 86400.0


def parse_since(text: str) -> float:
    """Seconds in `--since`'s value: days as well as what spotrun.core.durations reads."""
    word = text.strip().lower()
    if word.endswith("d"):
        try:
            days = float(word[:-1])
        except ValueError:
            days = -1.0
        if days <= 0 or days * _DAY_S > 366 * _DAY_S:
            raise UsageError(
                f"--since {text!r} is not a span of days",
                hint="give days, hours or minutes: 3d, 12h, 30m",
            )
        return days * _DAY_S
    try:
        seconds = parse_duration(text, what="--since")
    except UsageError as exc:
        raise UsageError(exc.message, hint="give days, hours or minutes: 3d, 12h, 30m") from None
    if seconds <= 0:  # "never"
        raise UsageError(f"--since {text!r} is no span of time", hint="give 3d, 12h or 30m")
    return seconds


@dataclass(frozen=True)
class Window:
    shown: list[RunRecord]
    hidden: int  # ended runs older than the window

    def footer(self, since_s: float) -> str | None:
        """The line under the table that says what the window left out."""
        if not self.hidden:
            return None
        span = f"{since_s / _DAY_S:g}d" if since_s >= _DAY_S else f"{since_s / 3600:g}h"
        runs = "run" if self.hidden == 1 else "runs"
        return (
            f"{self.hidden} {runs} ended more than {span} ago not shown: "
            "`spotrun ls --all` lists every run, `--since 3d` a wider window"
        )


def recent(runs: Sequence[RunRecord], since_s: float, now: float | None = None) -> Window:
    """The live runs and those ended within the last `since_s` seconds, in their order."""
    start = (time.time() if now is None else now) - since_s
    shown = [r for r in runs if not r.is_terminal or (r.ended_at or r.created_at) >= start]
    return Window(shown, len(runs) - len(shown))
