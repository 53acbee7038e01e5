"""A run's and a sweep's news, queued for whoever asked to be told (spotrun.notify.queue).

Called where each thing is decided: a run's state moves (spotrun.control.transitions and the
recovery's interruption), its first wait for capacity (spotrun.control.capacity_wait), a
sweep's end and a trial pruned (spotrun.sweep.supervisor). Queuing never fails the caller:
a ledger that cannot take the message now costs the message, never the run.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from spotrun.core.errors import SpotrunError
from spotrun.core.runstates import RunState
from spotrun.notify.queue import enqueue, subscriptions
from spotrun.store.ledger import Ledger, RunRecord

log = logging.getLogger(__name__)

BUDGET_PREFIX = "budget"  # spotrun.control.budget_watch's and the sweep's stop reasons
MAX_HOURS_WORD = "max-hours"  # spotrun.control.hours_cap's stop reason, the agent's deadline
SUMMARIES = {
    "waiting": "is waiting for capacity",
    "budget": "stopped at its budget",
    "max-hours": "stopped at its max-hours",
    "recovered": "recovered: running again",
}


def run_event(run: RunRecord, reason: str | None, earlier: list[RunState]) -> str | None:
    """The event a run's move into `run.state` is, given the states it was in before (oldest
    first); None for a move nobody is told of."""
    if run.state is RunState.SUCCEEDED:
        return "succeeded"
    if run.state is RunState.FAILED:
        return "failed"
    if run.state is RunState.STOPPED:
        why = (reason or "").lower()
        if why.startswith(BUDGET_PREFIX):
            return "budget"
        return "max-hours" if MAX_HOURS_WORD in why else "stopped"
    if run.state is RunState.INTERRUPTED:
        return "interrupted"
    if run.state is RunState.RUNNING and RunState.INTERRUPTED in earlier:
        last_running = max((i for i, s in enumerate(earlier) if s is RunState.RUNNING), default=-1)
        interrupted_since = any(s is RunState.INTERRUPTED for s in earlier[last_running + 1 :])
        return "recovered" if interrupted_since else None
    return None


def announce_move(ledger: Ledger, run: RunRecord, reason: str | None) -> None:
    """Queue the news of the move that just brought `run` to its state, if it is news."""

    def queue() -> None:
        if not subscriptions(ledger, run.id):  # the common case: one cheap read
            return
        earlier = [t.to_state for t in ledger.transitions(run.id)][:-1]
        event = run_event(run, reason, earlier)
        if event is not None:
            enqueue(ledger, run.id, event, _run_fields(ledger, run, event, reason))

    _safely(queue, run.id)


def announce_waiting(ledger: Ledger, run: RunRecord, note: str) -> None:
    """The run found no capacity and waits for it (told once per wait)."""
    _safely(
        lambda: enqueue(ledger, run.id, "waiting", _run_fields(ledger, run, "waiting", note)),
        run.id,
    )


def announce_sweep_end(
    ledger: Ledger, sweep_id: str, name: str, state: str, summary: str, best: str | None
) -> None:
    fields = {
        "subject": f"sweep {name}",
        "summary": f"finished ({state})" + (f"; best: {best}" if best else ""),
        "sweep": name,
        "event": "sweep-finished",
        "state": state,
        "reason": summary,
        "best": best,
    }
    _safely(lambda: enqueue(ledger, sweep_id, "sweep-finished", fields), sweep_id)


def announce_pruned(ledger: Ledger, sweep_id: str, name: str, trial_run: str, reason: str) -> None:
    fields = {
        "subject": f"sweep {name}",
        "summary": f"pruned trial {trial_run}",
        "sweep": name,
        "run": trial_run,
        "event": "pruned",
        "state": "stopped",
        "reason": reason,
    }
    _safely(lambda: enqueue(ledger, sweep_id, "pruned", fields), sweep_id)


def _run_fields(ledger: Ledger, run: RunRecord, event: str, reason: str | None) -> dict[str, Any]:
    summary = SUMMARIES.get(event, event)
    return {
        "subject": f"run {run.name}",
        "summary": summary,
        "run": run.name,
        "run_id": run.id,
        "event": event,
        "state": run.state.value,
        "reason": reason,
        "cost": round(ledger.run_cost_usd(run.id), 6),
        "url": run.run_dir.as_uri(),
    }


def _safely(queue: Any, subject_id: str) -> None:
    try:
        queue()
    except (SpotrunError, sqlite3.Error) as exc:  # the run goes on; only the message is lost
        log.warning("notification for %s not queued: %s", subject_id, exc)
