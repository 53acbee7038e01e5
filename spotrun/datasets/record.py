"""The controller's side of staging: events from staging.json, and the run's staging record.

The job writes RUN_DIR/staging.json on the instance; the controller's sync brings it here.
Every staging (one per instance that ran the job: a replacement after an interruption stages
again, skipping what a cache volume holds) is kept in RUN_DIR/staging-history.json, keyed by
its start, so the record survives the next instance overwriting staging.json. The cost report
prices each staging's time span with the run's own bill.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spotrun.core.rundir import STAGING_FILE, STAGING_HISTORY_FILE
from spotrun.datasets.progress import StagingStatus, read_status

PROGRESS_EVENT_S = 30.0  # a progress event at most this often while staging runs


def read_history(run_dir: Path) -> list[StagingStatus]:
    try:
        data = json.loads((run_dir / STAGING_HISTORY_FILE).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    return [StagingStatus.from_dict(item) for item in data if isinstance(item, dict)]


def _write_history(run_dir: Path, items: list[StagingStatus]) -> None:
    path = run_dir / STAGING_HISTORY_FILE
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps([s.to_dict() for s in items]))
    os.replace(tmp, path)


def current(run_dir: Path) -> StagingStatus | None:
    try:
        return read_status((run_dir / STAGING_FILE).read_text())
    except OSError:
        return None


class StagingWatch:
    """Turns what staging.json says into the lines worth an event, and keeps the history."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._last: tuple[float, str] | None = None  # (started_at, state) last told
        self._last_progress_at = 0.0

    def poll(self) -> list[str]:
        status = current(self.run_dir)
        if status is None:
            return []
        self._remember(status)
        key = (status.started_at, status.state)
        lines = []
        if key != self._last:
            self._last = key
            self._last_progress_at = status.updated_at
            if status.state != "checking":
                lines.append(status.line())
        elif (
            status.state == "staging"
            and status.updated_at - self._last_progress_at >= PROGRESS_EVENT_S
        ):
            self._last_progress_at = status.updated_at
            lines.append(status.line())
        return lines

    def _remember(self, status: StagingStatus) -> None:
        """Keep `status` in the history, replacing an older view of the same staging."""
        history = read_history(self.run_dir)
        key = (status.started_at, status.pid)
        same = [h for h in history if (h.started_at, h.pid) == key]
        if same and same[0].updated_at >= status.updated_at:
            return  # nothing newer than what is kept
        kept = [h for h in history if (h.started_at, h.pid) != key]
        _write_history(self.run_dir, sorted([*kept, status], key=lambda s: s.started_at))


@dataclass(frozen=True)
class StagingSummary:
    """Every staging of one run, added up (what `status` and `cost` show)."""

    count: int
    seconds: float
    fetched_bytes: int
    total_bytes: int
    spans: tuple[tuple[float, float], ...]  # (start, end) of each, for pricing
    last: StagingStatus | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stagings": self.count,
            "seconds": round(self.seconds, 3),
            "fetched_bytes": self.fetched_bytes,
            "data_bytes": self.total_bytes,
            "state": self.last.state if self.last else None,
            "line": self.last.line() if self.last else None,
        }


def summary(run_dir: Path) -> StagingSummary | None:
    history = read_history(run_dir)
    now_status = current(run_dir)
    if now_status is not None and not any(
        (h.started_at, h.pid) == (now_status.started_at, now_status.pid) for h in history
    ):
        history.append(now_status)
    if not history:
        return None
    spans = tuple((h.started_at, h.ended_at or h.updated_at) for h in history)
    return StagingSummary(
        count=len(history),
        seconds=sum(end - start for start, end in spans),
        fetched_bytes=sum(h.fetched_bytes for h in history),
        total_bytes=max(h.total_bytes for h in history),
        spans=spans,
        last=max(history, key=lambda h: h.started_at),
    )
