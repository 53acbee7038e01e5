"""Following a run as it happens: its state moves, events, evaluations, the job's own output
and the trainer's progress inside an epoch, for `launch` and `resume` in the foreground."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spotrun.core.metrics_file import MetricsTail
from spotrun.core.rundir import JOB_LOG_FILE, METRICS_FILE, PROGRESS_FILE
from spotrun.core.runstates import TERMINAL, RunState
from spotrun.core.waiting import pause
from spotrun.store.ledger import Ledger


@dataclass(frozen=True)
class Update:
    """One thing that happened to a run, for a follower to show."""

    kind: str  # "state", "metrics", "event", "output", "progress", "end"
    at: float
    state: RunState
    text: str = ""  # "output": whole lines of the job's own output
    metrics: dict[str, Any] = field(default_factory=dict)  # "metrics" and "progress"


@dataclass
class FollowFrom:
    """Where a follower starts: by default the run's beginning; a resumed run's follower
    starts after its history (the transitions, evaluations and output it already had)."""

    transitions: int = 0
    events: int = 0
    after_step: int = -1  # evaluations at or before this step were shown before
    log_offset: int = 0

    @classmethod
    def now(cls, ledger: Ledger, run_id: str, after_step: int) -> FollowFrom:
        run = ledger.get_run(run_id)
        try:
            offset = (run.run_dir / JOB_LOG_FILE).stat().st_size
        except FileNotFoundError:
            offset = 0
        return cls(len(ledger.transitions(run_id)), len(ledger.events(run_id)), after_step, offset)


class _LogLines:
    """Whole lines appended to the job's log since the last read (a partial line waits)."""

    def __init__(self, path: Path, offset: int) -> None:
        self.path, self.offset = path, offset

    def read_new(self) -> str:
        try:
            with open(self.path, "rb") as fh:
                if fh.seek(0, 2) < self.offset:  # replaced (a replacement instance's copy)
                    self.offset = 0
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return ""
        end = data.rfind(b"\n") + 1
        self.offset += end
        return data[:end].decode(errors="replace")

    def read_rest(self) -> str:
        """Everything left, a last line without its newline too (the job has ended)."""
        text = self.read_new()
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                tail = fh.read()
        except FileNotFoundError:
            return text
        self.offset += len(tail)
        return text + (tail.decode(errors="replace") + "\n" if tail else "")


class ProgressWatch:
    """The trainer's progress.json, each time it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None

    def read_new(self) -> dict[str, Any] | None:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return None
        key = (info.st_mtime_ns, info.st_size)
        if key == self._seen:
            return None
        try:
            value = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None  # replaced while read: the next look sees the whole one
        self._seen = key
        return value if isinstance(value, dict) else None


_JOB_ENDED_STATES = (RunState.SYNCING, RunState.INTERRUPTED, *TERMINAL)


def _after_job_end(update: Update) -> bool:
    """Whether the controller recorded `update` because the job had ended."""
    if update.kind == "state":
        return update.state in _JOB_ENDED_STATES
    return update.text.startswith("job: job exited")


def follow(
    ledger: Ledger,
    run_id: str,
    *,
    poll_s: float = 0.25,
    start: FollowFrom | None = None,
    output: bool | None = None,
) -> Iterator[Update]:
    """Updates of a run as they happen, ending with one of kind "end".

    `output`: also the job's own output, line by line (default: for your own command, whose
    output is the point; a recipe's trainer reports through metrics and progress instead)."""
    start = start or FollowFrom()
    seen_transitions, seen_events, shown_step = start.transitions, start.events, start.after_step
    run = ledger.get_run(run_id)
    tail = MetricsTail(run.run_dir / METRICS_FILE)
    progress = ProgressWatch(run.run_dir / PROGRESS_FILE)
    show_output = run.spec.job is not None if output is None else output
    log = _LogLines(run.run_dir / JOB_LOG_FILE, start.log_offset) if show_output else None
    while True:
        run = ledger.get_run(run_id)
        transitions = ledger.transitions(run_id)
        events = ledger.events(run_id)
        fresh = [
            Update("state", t.at, t.to_state, t.reason or "")
            for t in transitions[seen_transitions:]
        ] + [
            Update("event", e.at, run.state, f"{e.kind}: {e.message}") for e in events[seen_events:]
        ]
        fresh.sort(key=lambda u: u.at)
        # The job's last lines were written before it ended: shown before what followed its
        # end (the controller saw the exit, synced, finished), even when all of that came
        # within one look.
        cut = next((i for i, u in enumerate(fresh) if _after_job_end(u)), len(fresh))
        yield from fresh[:cut]
        seen_transitions, seen_events = len(transitions), len(events)
        if log is not None:
            text = log.read_rest() if run.is_terminal else log.read_new()
            if text:
                yield Update("output", time.time(), run.state, text=text)
        yield from fresh[cut:]
        for record in tail.read_new():
            step = record.get("step")
            if isinstance(step, int) and step <= shown_step:
                continue  # shown before a resume, or rewritten by one
            shown_step = step if isinstance(step, int) else shown_step
            yield Update("metrics", time.time(), run.state, metrics=record)
        if not run.is_terminal:
            moved = progress.read_new()
            if moved is not None:
                yield Update("progress", time.time(), run.state, metrics=moved)
        if run.is_terminal:
            yield Update("end", run.ended_at or time.time(), run.state, run.message or "")
            return
        pause(poll_s)  # the run's ledger rows and files, read again
