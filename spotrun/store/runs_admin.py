"""Reopening an ended run (`spotrun resume`) and forgetting one (`spotrun rm`) in the ledger.

Both are one IMMEDIATE transaction on the ledger's connection, so a supervisor or another
command never sees half of either.
"""

from __future__ import annotations

import json

from spotrun.cloud.base import Plan
from spotrun.core.config import LaunchSpec
from spotrun.core.errors import StateError
from spotrun.core.runstates import RESUMABLE, TERMINAL, RunState
from spotrun.store.adopt import forgotten_key
from spotrun.store.ledger import Ledger, RunRecord

# Rows that belong to one run, children first (the foreign keys point at runs).
_RUN_TABLES = ("cost_lines", "events", "transitions", "instances")


def reopen_run(
    ledger: Ledger,
    run_id: str,
    spec: LaunchSpec,
    plan: Plan,
    reason: str,
    *,
    succeeded_too: bool = False,
) -> RunRecord:
    """Move an ended (stopped or failed; succeeded too when `succeeded_too`: trained further)
    run back to planned with a new spec and plan.

    Its id, name, run folder, instances, events and cost lines stay: the run goes on where it
    ended. Raises StateError if it is not resumable any more (another command got there first).
    """
    now = ledger.clock()
    reopens = RESUMABLE | {RunState.SUCCEEDED} if succeeded_too else RESUMABLE
    with ledger.write() as db:
        row = db.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchone()
        current = RunState(row["state"]) if row is not None else None
        if current not in reopens:
            shown = current.value if current is not None else "gone"
            raise StateError(f"run {run_id} is {shown}; only a stopped or failed run resumes")
        assert current is not None
        db.execute(
            "UPDATE runs SET state = ?, ended_at = NULL, message = NULL, stop_requested = 0, "
            "supervisor_pid = NULL, spec_json = ?, plan_json = ? WHERE id = ?",
            (RunState.PLANNED.value, spec.model_dump_json(), json.dumps(plan.to_dict()), run_id),
        )
        db.execute(
            "INSERT INTO transitions (run_id, from_state, to_state, at, reason) "
            "VALUES (?, ?, ?, ?, ?)",
            (run_id, current.value, RunState.PLANNED.value, now, reason),
        )
    return ledger.get_run(run_id)


def forget_run(ledger: Ledger, run_id: str) -> None:
    """Delete an ended run's rows (its folder is the caller's to remove)."""
    with ledger.write() as db:
        row = db.execute("SELECT state FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return
        if RunState(row["state"]) not in TERMINAL:
            raise StateError(f"run {run_id} is {row['state']}; only an ended run can be forgotten")
        for table in _RUN_TABLES:
            db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
        db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        # Its folder goes after this: until then it must not be adopted back (store.adopt)
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (forgotten_key(run_id), "1"))
