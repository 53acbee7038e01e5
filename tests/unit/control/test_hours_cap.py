"""The controller's --max-hours: the stop begins one stop margin before the cap, never in the
first half of the run's hours, and a run without the cap never stops for time."""

from __future__ import annotations

from pathlib import Path

from spotrun.control.hours_cap import hours_cap_reason, stop_begins_at
from spotrun.core.config import LaunchSpec, load_settings
from spotrun.store.ledger import Ledger


def test_the_stop_begins_a_margin_before_the_cap_and_says_how_to_go_on(tmp_path: Path) -> None:
    with Ledger(load_settings(tmp_path)) as ledger:
        free = ledger.create_run(LaunchSpec(recipe="digits-fast"))
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", name="timed", max_hours=2.0))
    assert stop_begins_at(free.created_at, free.spec.max_hours, 180.0) is None
    assert hours_cap_reason(free, 180.0, free.created_at + 10**9) is None

    begin = stop_begins_at(run.created_at, run.spec.max_hours, 180.0)
    assert begin is not None and begin == run.created_at + 2 * 3600 - 180
    assert hours_cap_reason(run, 180.0, begin - 1) is None
    reason = hours_cap_reason(run, 180.0, begin)
    assert reason is not None and "max-hours: its 2h cap is reached" in reason
    assert "spotrun resume timed --max-hours N" in reason


def test_a_short_cap_keeps_its_first_half(tmp_path: Path) -> None:
    with Ledger(load_settings(tmp_path)) as ledger:
        run = ledger.create_run(LaunchSpec(recipe="digits-fast", max_hours=0.01))  # 36 s
    assert stop_begins_at(run.created_at, run.spec.max_hours, 180.0) == run.created_at + 18.0
    assert hours_cap_reason(run, 180.0, run.created_at + 17.9) is None
    assert hours_cap_reason(run, 0.0, run.created_at + 35.9) is None  # no margin: the cap itself
    assert hours_cap_reason(run, 0.0, run.created_at + 36.0) is not None
