"""The runs table and each run's transitions: creating, finding, moving and annotating runs.

Every state change is a compare-and-set inside one IMMEDIATE transaction, so two writers never
both win a move. A part of the Ledger (spotrun.store.ledger), sharing its connection.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from typing import TYPE_CHECKING, Any

from spotrun.cloud.base import Plan
from spotrun.core.errors import NotFoundError
from spotrun.core.home import RUNS_FOLDER
from spotrun.core.runstates import TERMINAL, RunState, check_transition
from spotrun.store.connection import LedgerDatabase
from spotrun.store.name_reuse import NAME_EVENT, free_run_name, name_note
from spotrun.store.run_records import RunRecord, Transition, new_run_id, run_from_row

if TYPE_CHECKING:
    from spotrun.core.config import LaunchSpec


class RunTables(LedgerDatabase):
    """The ledger's runs and transitions."""

    def create_run(
        self,
        spec: LaunchSpec,
        *,
        run_id: str | None = None,
        plan: Plan | None = None,
        sweep_id: str | None = None,
    ) -> RunRecord:
        run_id = run_id or new_run_id()
        name = spec.name or f"{spec.recipe}-{run_id[:6]}"
        run_dir = self.home / RUNS_FOLDER / run_id
        now = self.clock()
        # The folder first: a run the ledger knows never lacks its folder (a process killed
        # between the two leaves an empty folder, which is taken away when the row fails).
        made = not run_dir.exists()
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            with self.write() as db:
                moved = None
                if spec.name is not None:  # the newest run takes the name (store.name_reuse)
                    moved = free_run_name(db, name)
                elif db.execute("SELECT 1 FROM runs WHERE name = ?", (name,)).fetchone():
                    name = f"{spec.recipe}-{run_id}"  # the short default is taken; the id is unique
                db.execute(
                    "INSERT INTO runs (id, name, recipe, cloud, state, created_at, spec_json, "
                    "plan_json, run_dir, sweep_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        name,
                        spec.recipe,
                        spec.cloud,
                        RunState.PLANNED.value,
                        now,
                        spec.model_dump_json(),
                        json.dumps(plan.to_dict()) if plan is not None else None,
                        str(run_dir),
                        sweep_id,
                    ),
                )
                db.execute(
                    "INSERT INTO transitions (run_id, from_state, to_state, at, reason) "
                    "VALUES (?, NULL, ?, ?, ?)",
                    (run_id, RunState.PLANNED.value, now, "launch"),
                )
                if moved is not None:
                    db.execute(
                        "INSERT INTO events (run_id, at, kind, message) VALUES (?, ?, ?, ?)",
                        (run_id, now, NAME_EVENT, name_note("run", name, moved)),
                    )
        except BaseException:
            if made:
                with contextlib.suppress(OSError):  # only while still empty
                    run_dir.rmdir()
            raise
        return self.get_run(run_id)

    def get_run(self, run_id: str) -> RunRecord:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no run with id '{run_id}'")
        return run_from_row(row)

    def resolve(self, ref: str) -> RunRecord:
        """A run by exact name, exact id, or unique id prefix."""
        ref = ref.strip()
        if not ref:
            raise NotFoundError("an empty run reference matches no run")
        row = self._db.execute("SELECT * FROM runs WHERE name = ? OR id = ?", (ref, ref)).fetchone()
        if row is not None:
            return run_from_row(row)
        rows = self._db.execute(
            "SELECT * FROM runs WHERE id LIKE ? ESCAPE '\\' ORDER BY created_at",
            (_like_prefix(ref),),
        ).fetchall()
        if not rows:
            raise NotFoundError(
                f"no run named '{ref}' and no run id starts with it",
                hint="`spotrun ls --all` lists every run",
            )
        if len(rows) > 1:
            ids = ", ".join(f"{r['id']} ({r['name']})" for r in rows[:5])
            raise NotFoundError(
                f"'{ref}' is ambiguous: it starts {len(rows)} run ids: {ids}",
                hint="type more of the id",
            )
        return run_from_row(rows[0])

    def list_runs(
        self, *, include_all: bool = True, sweep_id: str | None = None, since: float | None = None
    ) -> list[RunRecord]:
        query = "SELECT * FROM runs"
        clauses: list[str] = []
        params: list[Any] = []
        if sweep_id is not None:
            clauses.append("sweep_id = ?")
            params.append(sweep_id)
        if since is not None:
            clauses.append("created_at >= ?")
            params.append(since)
        if clauses:
            query += " WHERE " + " AND ".join(clauses)
        rows = [run_from_row(r) for r in self._db.execute(query + " ORDER BY created_at", params)]
        if include_all:
            return rows
        # Without --all: every live run, plus the most recent finished ones.
        finished = [r for r in rows if r.is_terminal][-20:]
        keep = {r.id for r in finished}
        return [r for r in rows if not r.is_terminal or r.id in keep]

    def active_runs(self) -> list[RunRecord]:
        return [run_from_row(r) for r in self._active("*")]

    def active_run_sweeps(self) -> dict[str, str | None]:
        """Each active run's id and its sweep's (None: no sweep), oldest run first: what the
        controller looks at every second, without reading and parsing every run."""
        return {row["id"]: row["sweep_id"] for row in self._active("id, sweep_id")}

    def _active(self, columns: str) -> sqlite3.Cursor:
        terminal = tuple(s.value for s in TERMINAL)
        return self._db.execute(
            f"SELECT {columns} FROM runs WHERE state NOT IN ({','.join('?' * len(terminal))}) "
            "ORDER BY created_at",
            terminal,
        )

    def state_of(self, run_id: str) -> tuple[RunState, bool]:
        """A run's state, and whether it is asked to stop: what its controller looks at each
        poll of a running job, without reading and parsing the whole run."""
        row = self._db.execute(
            "SELECT state, stop_requested FROM runs WHERE id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"no run with id '{run_id}'")
        return RunState(row["state"]), bool(row["stop_requested"])

    def transition(self, run_id: str, target: RunState, reason: str | None = None) -> RunRecord:
        """Move a run to `target`, or raise StateError if its current state does not allow it."""
        now = self.clock()
        with self.write() as db:
            row = db.execute(
                "SELECT state, started_at FROM runs WHERE id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise NotFoundError(f"no run with id '{run_id}'")
            current = RunState(row["state"])
            check_transition(current, target)
            started_at = row["started_at"]
            if target is RunState.RUNNING and started_at is None:
                started_at = now
            ended_at = now if target in TERMINAL else None
            db.execute(
                "UPDATE runs SET state = ?, started_at = ?, ended_at = ?, "
                "message = COALESCE(?, message) WHERE id = ?",
                (
                    target.value,
                    started_at,
                    ended_at,
                    reason if target in TERMINAL else None,
                    run_id,
                ),
            )
            db.execute(
                "INSERT INTO transitions (run_id, from_state, to_state, at, reason) "
                "VALUES (?, ?, ?, ?, ?)",
                (run_id, current.value, target.value, now, reason),
            )
        return self.get_run(run_id)

    def transitions(self, run_id: str) -> list[Transition]:
        rows = self._db.execute(
            "SELECT from_state, to_state, at, reason FROM transitions WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [
            Transition(
                RunState(r["from_state"]) if r["from_state"] else None,
                RunState(r["to_state"]),
                r["at"],
                r["reason"],
            )
            for r in rows
        ]

    def set_plan(self, run_id: str, plan: Plan) -> None:
        self._update(run_id, plan_json=json.dumps(plan.to_dict()))

    def set_metrics(self, run_id: str, metrics: dict[str, Any]) -> None:
        self._update(run_id, last_metrics_json=json.dumps(metrics))

    def set_message(self, run_id: str, message: str | None) -> None:
        self._update(run_id, message=message)

    def set_supervisor(self, run_id: str, pid: int | None) -> None:
        self._update(run_id, supervisor_pid=pid)

    def request_stop(self, run_id: str, reason: str | None = None) -> None:
        """Ask the run's supervisor to stop it; `reason` becomes its final message."""
        self._update(run_id, stop_requested=1, message=reason or "stopped by the user")

    def _update(self, run_id: str, **columns: Any) -> None:
        assignments = ", ".join(f"{name} = ?" for name in columns)
        with self.write() as db:
            cur = db.execute(
                f"UPDATE runs SET {assignments} WHERE id = ?", (*columns.values(), run_id)
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no run with id '{run_id}'")


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
