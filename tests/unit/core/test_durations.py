"""Durations as typed (`--idle-stop 30m`): s, m, h, bare seconds, never; bad input named."""

from __future__ import annotations

import pytest

from spotrun.core.durations import NEVER, format_duration, parse_duration
from spotrun.core.errors import UsageError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("30m", 1800.0), ("2h", 7200.0), ("1.5h", 5400.0), ("45", 45.0),
     (" 3S ", 3.0), ("never", NEVER), ("NEVER", NEVER), (".5m", 30.0)],
)  # fmt: skip
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "5x", "1d", "-5m", "5 minutes", "0", "0s", "1e3"])
def test_bad_durations_say_what_is_accepted(text: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_duration(text, what="--idle-stop")
    assert "--idle-stop" in caught.value.message and repr(text) in caught.value.message
    assert "never" in (caught.value.hint or "")


@pytest.mark.parametrize("seconds", [0.0, 3.0, 90.0, 1800.0, 7200.0, 5400.0, 4.5])
def test_format_reads_back(seconds: float) -> None:
    assert parse_duration(format_duration(seconds)) == seconds
