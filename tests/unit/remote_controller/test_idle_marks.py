"""The controller instance's idle decision and the marks it is made from (real files)."""

from __future__ import annotations

import math
import time
from pathlib import Path

from spotrun.remote_controller import idle_marks as marks
from spotrun.remote_controller.idle_stop import poll_s

T0 = 1_700_000_000.0


def test_it_stops_only_once_idle_for_the_whole_time_since_the_later_of_use_and_liveness() -> None:
    left = marks.seconds_left
    # nothing live since the watcher started at T0, no command yet: 30 min from T0
    assert left(T0 + 60, 1800, last_command_at=None, last_live_at=T0) == 1740
    assert left(T0 + 1800, 1800, last_command_at=None, last_live_at=T0) == 0  # stop now
    # a command later than the last liveness restarts the countdown
    assert left(T0 + 1800, 1800, last_command_at=T0 + 1000, last_live_at=T0) == 1000
    # a run that was live until T0 + 1500 holds it past an earlier command
    assert left(T0 + 1800, 1800, last_command_at=T0 + 1000, last_live_at=T0 + 1500) == 1500
    assert left(T0 + 3400, 1800, last_command_at=T0 + 1000, last_live_at=T0 + 1500) < 0
    # never
    assert math.isinf(left(T0 + 10**9, 0, last_command_at=None, last_live_at=T0))


def test_the_watcher_polls_a_tenth_of_the_idle_time_within_bounds() -> None:
    assert poll_s(3) == 0.5 and poll_s(60) == 6 and poll_s(1800) == 30


def test_a_command_marks_use_but_the_laptops_status_question_does_not(tmp_path: Path) -> None:
    marks.note_command(tmp_path, ["ls"])  # no idle stop configured: nothing happens
    assert marks.last_command_at(tmp_path) is None
    config = marks.IdleConfig("i-0abc", "us-east-1", 90.0)
    marks.write_config(tmp_path, config)
    assert marks.read_config(tmp_path) == config
    marks.touch_mark(tmp_path, at=T0)
    marks.write_state(tmp_path, started_at=T0, last_live_at=T0, live=False)
    # a watcher counts as running: take its lock as the watcher does
    from spotrun.core.locks import try_lock

    held = try_lock(tmp_path / marks.IDLE_WATCH_LOCK_FILE)
    assert held is not None
    held.write("4242\n")
    held.flush()
    try:
        marks.note_command(tmp_path, ["controller", "status", "--json"])
        assert marks.last_command_at(tmp_path) == T0
        seen = marks.view(tmp_path, live=False, now=T0 + 30)
        assert seen is not None and seen.stops_in_s == 60 and seen.idle_since == T0
        assert seen.watcher_pid == 4242
        assert marks.view(tmp_path, live=True, now=T0 + 30).idle_since is None  # type: ignore[union-attr]
        before = time.time()
        marks.note_command(tmp_path, ["ls", "--json"])
        assert (marks.last_command_at(tmp_path) or 0) >= before - 1
    finally:
        held.close()
    marks.write_config(tmp_path, marks.IdleConfig("i-0abc", "us-east-1", 0.0))  # never
    assert marks.read_config(tmp_path) is None and marks.view(tmp_path, live=False) is None
