"""Reopening an ended run (`spotrun resume`) and forgetting one (`spotrun rm`) in the ledger.

Both are one IMMEDIATE transaction on the ledger's connection, so a supervisor or another
command never sees half of either.
"""

from __future__ import annotations

import json
import sqlite3

from spotrun.cloud.base import Plan
from spotrun.core.config import LaunchSpec
from spotrun.core.errors import StateError
from spotrun.core.runstates import RESUMABLE, TERMINAL, RunState
from spotrun.store.adopt import forgotten_key
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepState

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
        _delete_run(db, run_id)


def _delete_run(db: sqlite3.Connection, run_id: str) -> None:
    for table in _RUN_TABLES:
        db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
    db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
    # Its folder goes after this: until then it must not be adopted back (store.adopt)
    db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (forgotten_key(run_id), "1"))


def forget_sweep_rows(ledger: Ledger, sweep_id: str) -> list[str]:
    """Delete an ended sweep's rows: its trials, packs and shares, and every trial's run as
    forget_run does; returns the runs' ids (their folders, and the sweep's, are the caller's
    to remove). StateError while the sweep or one of its trials is live."""
    with ledger.write() as db:
        row = db.execute("SELECT state FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
        if row is None:
            return []
        runs = db.execute("SELECT id, state FROM runs WHERE sweep_id = ?", (sweep_id,)).fetchall()
        live = [r["id"] for r in runs if RunState(r["state"]) not in TERMINAL]
        if row["state"] == SweepState.RUNNING.value or live:
            raise StateError(f"sweep {sweep_id} is live; only an ended sweep can be forgotten")
        packs = "SELECT id FROM packs WHERE sweep_id = ?"
        # children before the rows they point at (the ledger's foreign keys are on)
        db.execute(f"DELETE FROM pack_stays WHERE pack_id IN ({packs})", (sweep_id,))
        db.execute(f"DELETE FROM pack_instances WHERE pack_id IN ({packs})", (sweep_id,))
        db.execute("DELETE FROM packs WHERE sweep_id = ?", (sweep_id,))
        db.execute("DELETE FROM sweep_trials WHERE sweep_id = ?", (sweep_id,))
        db.execute("DELETE FROM pbt_lineage WHERE sweep_id = ?", (sweep_id,))
        for run in runs:
            _delete_run(db, run["id"])
        db.execute("DELETE FROM sweeps WHERE id = ?", (sweep_id,))
    return [r["id"] for r in runs]
