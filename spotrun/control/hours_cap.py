"""The controller's watch over a run's `--max-hours`: when to begin stopping it.

The hours count from the run's creation (`spotrun resume --max-hours N` moves the cap to N
hours from the resume). The controller begins the stop (checkpoint, sync, terminate) one stop
margin (`budget_stop_margin_s`, the time a stop takes) before the cap, but never in the first
half of the run's hours, so that it ends the run cleanly before the instance's agent, which
ends it at the cap itself even with no controller (spotrun.control.watcher_start).
"""

from __future__ import annotations

from spotrun.core.durations import format_duration
from spotrun.store.ledger import RunRecord


def stop_begins_at(created_at: float, max_hours: float | None, margin_s: float) -> float | None:
    """The wall time (epoch seconds) at which the controller begins stopping a run created at
    `created_at` with `max_hours` (None: never)."""
    if max_hours is None:
        return None
    limit_s = max_hours * 3600.0
    return created_at + limit_s - min(margin_s, limit_s / 2)


def hours_cap_reason(run: RunRecord, margin_s: float, now: float) -> str | None:
    """Why the run must stop now for its --max-hours, or None while it has time left."""
    begin = stop_begins_at(run.created_at, run.spec.max_hours, margin_s)
    if begin is None or now < begin:
        return None
    assert run.spec.max_hours is not None
    cap = format_duration(run.spec.max_hours * 3600.0)
    return (
        f"max-hours: its {cap} cap is reached (`spotrun resume {run.name} --max-hours N` "
        "gives it N more hours)"
    )
