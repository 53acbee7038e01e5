"""The agent's watcher measures durations on its own clocks: the run's deadline from its start
on the monotonic clock, and a notice's window from the notice's `time` on its wall clock."""

from __future__ import annotations

import time
from pathlib import Path

from spotrun.agent.imds import notice_time
from spotrun.agent.watcher import DEADLINE, WatchConfig, Watcher


def _watcher(tmp_path: Path, deadline_in_s: float | None = None) -> Watcher:
    config = WatchConfig(
        run_dir=tmp_path,
        run_id="c1ock0000001",
        metadata_url="http://127.0.0.1:9",
        no_progress_s=0.0,  # never: only the deadline is judged here
        deadline_in_s=deadline_in_s,
        upload_margin_s=20.0,
        checkpoint_wait_s=100.0,
    )
    return Watcher(config)


def test_the_deadline_in_seconds_ignores_the_wall_clock(tmp_path: Path) -> None:
    """A wall clock hours ahead or behind changes nothing: only time since the start counts."""
    later = _watcher(tmp_path, deadline_in_s=3600.0)
    for wall in (time.time() - 7200, time.time(), time.time() + 7200):
        assert later.check_lifetime(wall) is None
    now = _watcher(tmp_path, deadline_in_s=0.0)
    ending = now.check_lifetime(time.time() - 7200)
    assert ending is not None and ending.why == DEADLINE


def test_the_window_after_a_notice_is_its_time_left_less_the_upload_margin(
    tmp_path: Path,
) -> None:
    watcher = _watcher(tmp_path)
    assert watcher.checkpoint_window(120.0) == 100.0  # EC2's two minutes
    assert watcher.checkpoint_window(60.0) == 40.0
    assert watcher.checkpoint_window(5.0) == 2.5  # the margin would take it all: half of it
    assert watcher.checkpoint_window(-1.0) == 0.0  # past already: store what there is
    assert watcher.checkpoint_window(None) == 100.0  # a notice without a readable time


def test_the_notice_time_is_read_as_ec2_writes_it() -> None:
    assert notice_time("2026-12-06T07:23:36Z") == 1796541816.0
    assert notice_time("soon") is None and notice_time(None) is None
