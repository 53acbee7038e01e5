"""The note a run waiting for capacity carries (its message while it waits), and how `ls`,
`status` and the foreground view say it: the times stored are absolute (unix seconds), so
whoever reads the note later says how far off the next ask is *then*.

Stored: waiting for capacity: c6i.large in us-east-1a (spot); next ask at 1700000040; gives
        up at 1700007200
Shown:  waiting for capacity: c6i.large in us-east-1a (spot); next ask in 12 s; gives up in
        1h59m
"""

from __future__ import annotations

import re
import time

PREFIX = "waiting for capacity: "
SPOT_POLICIES = ("spot", "auto", "on-demand")  # --spot-policy (config's SpotPolicy)
MAX_CAPACITY_WAIT_S = 7 * 86400.0  # a week: a longer wait for capacity is a typo
_AT = re.compile(r"(next ask|gives up) at (\d+(?:\.\d+)?)")


def waiting_note(what: str, next_ask_at: float, gives_up_at: float) -> str:
    return f"{PREFIX}{what}; next ask at {next_ask_at:.0f}; gives up at {gives_up_at:.0f}"


def is_waiting_note(message: str | None) -> bool:
    return message is not None and message.startswith(PREFIX)


def show_note(message: str, now: float | None = None) -> str:
    """The note with its times said as seconds from `now`; any other message unchanged."""
    if not is_waiting_note(message):
        return message
    moment = time.time() if now is None else now

    def relative(found: re.Match[str]) -> str:
        return f"{found[1]} in {_span(max(0.0, float(found[2]) - moment))}"

    return _AT.sub(relative, message)


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"
