"""The run state machine: the states a run can be in and the moves allowed between them.

Nothing here touches storage; the ledger calls `check_transition` before it writes one.
"""

from __future__ import annotations

from enum import Enum

from spotrun.core.errors import StateError


class RunState(str, Enum):
    PLANNED = "planned"  # spec validated, offer chosen, nothing requested yet
    REQUESTED = "requested"  # capacity asked for, not yet granted
    PROVISIONING = "provisioning"  # instance granted, waiting for it to boot and answer
    BOOTSTRAPPING = "bootstrapping"  # code pushed, provision script running
    RUNNING = "running"  # the job runs inside its tmux session
    INTERRUPTED = "interrupted"  # the cloud took the capacity away; a replacement comes next
    SYNCING = "syncing"  # the job ended; outputs and checkpoints are being pulled back
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"  # stopped by the user or by a budget/time cap

    def __str__(self) -> str:
        return self.value


TERMINAL: frozenset[RunState] = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.STOPPED})

_ENDINGS = {RunState.FAILED, RunState.STOPPED}
# Ended runs that `spotrun resume` may start again from their newest checkpoint (a run that
# succeeded has nothing left to do). Reopening is not a transition of the table below: the
# controller can never move an ended run, only the ledger's reopen can (spotrun.store.runs_admin).
RESUMABLE: frozenset[RunState] = frozenset({RunState.FAILED, RunState.STOPPED})

ALLOWED: dict[RunState, frozenset[RunState]] = {
    RunState.PLANNED: frozenset({RunState.REQUESTED, RunState.PROVISIONING} | _ENDINGS),
    RunState.REQUESTED: frozenset({RunState.PROVISIONING, RunState.INTERRUPTED} | _ENDINGS),
    RunState.PROVISIONING: frozenset(
        {RunState.BOOTSTRAPPING, RunState.RUNNING, RunState.INTERRUPTED} | _ENDINGS
    ),
    RunState.BOOTSTRAPPING: frozenset({RunState.RUNNING, RunState.INTERRUPTED} | _ENDINGS),
    RunState.RUNNING: frozenset({RunState.SYNCING, RunState.INTERRUPTED} | _ENDINGS),
    RunState.INTERRUPTED: frozenset({RunState.REQUESTED, RunState.PROVISIONING} | _ENDINGS),
    RunState.SYNCING: frozenset(
        {RunState.SUCCEEDED, RunState.INTERRUPTED, RunState.FAILED, RunState.STOPPED}
    ),
    RunState.SUCCEEDED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.STOPPED: frozenset(),
}


def is_terminal(state: RunState) -> bool:
    return state in TERMINAL


def check_transition(current: RunState, target: RunState) -> None:
    """Raise StateError unless a run in `current` may move to `target`."""
    if target not in ALLOWED[current]:
        allowed = ", ".join(sorted(s.value for s in ALLOWED[current])) or "nothing (it has ended)"
        raise StateError(
            f"a run cannot move from {current.value} to {target.value}; "
            f"from {current.value} it may move to {allowed}"
        )
