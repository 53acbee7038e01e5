"""The ledger: spotrun's one store of local state (SQLite in WAL mode under SPOTRUN_HOME).

Runs, every state transition with its time, instances, run events, cost lines and cached spot
price points. Several spotrun processes (the CLI, run supervisors) share it; every state change
is a compare-and-set inside one IMMEDIATE transaction, so two writers never both win a move.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cloud.base import Plan
from spotrun.core.errors import LedgerError, NotFoundError, UsageError
from spotrun.core.home import LEDGER_FILE, RUNS_FOLDER
from spotrun.core.runstates import TERMINAL, RunState, check_transition
from spotrun.store.connection import (
    BUSY_WAIT_S,
    BusyRetryConnection,
    ensure_writable_home,
    keep_private,
)
from spotrun.store.run_records import (
    CostLine,
    InstanceRecord,
    RunEvent,
    RunRecord,
    Transition,
    new_run_id,
    parse_fraction,
    run_from_row,
)
from spotrun.store.schema import (
    APP_ID,
    MIGRATIONS,
    SCHEMA,
    SCHEMA_VERSION,
    SWEEP_SCHEMA,
    run_script,
)

if TYPE_CHECKING:
    from spotrun.core.config import LaunchSpec, Settings

# What other modules import from here (the ledger's records live in store.run_records).
__all__ = [
    "SCHEMA_VERSION",
    "CostLine",
    "InstanceRecord",
    "Ledger",
    "RunEvent",
    "RunRecord",
    "Transition",
    "new_run_id",
]


class Ledger:
    """Handle on the ledger database. Cheap to open; open one per process."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        home: Path | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """The ledger of `settings.home`; or of `home`, its settings read from home's
        config.toml when first asked for (listing finished runs needs none)."""
        if settings is not None:
            home = settings.home
        elif home is None:
            raise ValueError("Ledger needs settings or a home")
        self._settings = settings
        self.home = home
        self.clock = clock  # stamps every time the ledger records (a fixed one for imports, tests)
        self.path = self.home / LEDGER_FILE
        ensure_writable_home(self.home)
        keep_private(self.path)
        try:
            self._db = sqlite3.connect(
                self.path,
                timeout=BUSY_WAIT_S,
                isolation_level=None,
                factory=BusyRetryConnection,
            )
            self._db.row_factory = sqlite3.Row
            self._db.where = str(self.path)
            self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_WAIT_S * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
            keep_private(self.path)  # the -wal and -shm SQLite just made
        except LedgerError:
            raise
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc) or "unable to open" in str(exc):
                raise LedgerError(
                    f"cannot write the ledger at {self.path} ({exc})",
                    hint="fix its permissions or set SPOTRUN_HOME to a folder you can write",
                ) from exc
            raise LedgerError(f"cannot use the ledger at {self.path} ({exc})") from exc
        except sqlite3.DatabaseError as exc:
            raise LedgerError(
                f"{self.path} is not a readable spotrun ledger ({exc})",
                hint=f"move it aside (mv {self.path} {self.path}.bad) and spotrun starts a new one",
            ) from exc

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            # the settings models import pydantic (~100 ms): only what needs settings pays it
            from spotrun.core.config import load_settings

            self._settings = load_settings(self.home)
        return self._settings

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- schema
    def _migrate(self) -> None:
        with self._write():
            has_meta = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            version = 0  # a new ledger
            if has_meta:
                rows = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
                if rows and rows.get("app") != APP_ID:
                    raise LedgerError(
                        f"{self.path} is an SQLite file but not a spotrun ledger",
                        hint="point SPOTRUN_HOME elsewhere or move the file aside",
                    )
                try:
                    version = int(rows.get("schema_version", "0"))
                except ValueError:
                    raise LedgerError(
                        f"{self.path} has a schema version that is not a number "
                        f"({rows.get('schema_version')!r})",
                        hint=f"move it aside (mv {self.path} {self.path}.bad) and spotrun "
                        "starts a new one",
                    ) from None
                if version > SCHEMA_VERSION:
                    raise LedgerError(
                        f"{self.path} was written by a newer spotrun (ledger schema v{version}; "
                        f"this spotrun reads up to v{SCHEMA_VERSION})",
                        hint="upgrade spotrun (pip install -U spotrun)",
                    )
                if version == SCHEMA_VERSION:
                    return
            if version == 0:
                run_script(self._db, SCHEMA)
                run_script(self._db, SWEEP_SCHEMA)
            else:  # an older ledger: step it up, keeping everything it holds
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    run_script(self._db, MIGRATIONS[step])
            self._db.execute("INSERT OR REPLACE INTO meta VALUES ('app', ?)", (APP_ID,))
            self._db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )

    # The sweep tables' own accessors (spotrun.store.sweeps) share this connection and its
    # transactions.
    @property
    def db(self) -> sqlite3.Connection:
        return self._db

    def write(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return self._write()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: readers go on, other writers wait for it."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # ------------------------------------------------------------------- runs
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
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE name = ?", (name,)).fetchone():
                if spec.name is not None:
                    raise UsageError(
                        f"a run named '{name}' already exists",
                        hint=f"choose another --name, or continue it (`spotrun resume {name}`) "
                        f"or forget it (`spotrun rm {name}`) once it has ended",
                    )
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
        run_dir.mkdir(parents=True, exist_ok=True)
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
        terminal = tuple(s.value for s in TERMINAL)
        rows = self._db.execute(
            f"SELECT * FROM runs WHERE state NOT IN ({','.join('?' * len(terminal))}) "
            "ORDER BY created_at",
            terminal,
        )
        return [run_from_row(r) for r in rows]

    def transition(self, run_id: str, target: RunState, reason: str | None = None) -> RunRecord:
        """Move a run to `target`, or raise StateError if its current state does not allow it."""
        now = self.clock()
        with self._write() as db:
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
        with self._write() as db:
            cur = db.execute(
                f"UPDATE runs SET {assignments} WHERE id = ?", (*columns.values(), run_id)
            )
            if cur.rowcount == 0:
                raise NotFoundError(f"no run with id '{run_id}'")

    # -------------------------------------------------------------- instances
    def upsert_instance(self, inst: InstanceRecord) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO instances (id, run_id, provider, region, zone, instance_type, market, "
                "node_index, address, state, launched_at, terminated_at, end_reason, details_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET address = COALESCE(excluded.address, address), "
                "state = excluded.state, "
                "launched_at = COALESCE(excluded.launched_at, launched_at), "
                "terminated_at = COALESCE(excluded.terminated_at, terminated_at), "
                "end_reason = COALESCE(excluded.end_reason, end_reason), "
                # an upsert without details keeps those recorded (e.g. data volumes)
                "details_json = CASE WHEN excluded.details_json = '{}' THEN details_json "
                "ELSE excluded.details_json END",
                (
                    inst.id,
                    inst.run_id,
                    inst.provider,
                    inst.region,
                    inst.zone,
                    inst.instance_type,
                    inst.market,
                    inst.node_index,
                    inst.address,
                    inst.state,
                    inst.launched_at,
                    inst.terminated_at,
                    inst.end_reason,
                    json.dumps(inst.details),
                ),
            )

    def instances(self, run_id: str | None = None) -> list[InstanceRecord]:
        if run_id is None:
            rows = self._db.execute("SELECT * FROM instances ORDER BY launched_at")
        else:
            rows = self._db.execute(
                "SELECT * FROM instances WHERE run_id = ? ORDER BY launched_at, node_index",
                (run_id,),
            )
        return [
            InstanceRecord(
                id=r["id"],
                run_id=r["run_id"],
                provider=r["provider"],
                instance_type=r["instance_type"],
                market=r["market"],
                state=r["state"],
                region=r["region"],
                zone=r["zone"],
                node_index=r["node_index"],
                address=r["address"],
                launched_at=r["launched_at"],
                terminated_at=r["terminated_at"],
                end_reason=r["end_reason"],
                details=json.loads(r["details_json"] or "{}"),
            )
            for r in rows
        ]

    # ----------------------------------------------------------------- events
    def add_event(self, run_id: str, kind: str, message: str) -> None:
        with self._write() as db:
            db.execute(
                "INSERT INTO events (run_id, at, kind, message) VALUES (?, ?, ?, ?)",
                (run_id, self.clock(), kind, message),
            )

    def events(self, run_id: str) -> list[RunEvent]:
        rows = self._db.execute(
            "SELECT at, kind, message FROM events WHERE run_id = ? ORDER BY id", (run_id,)
        )
        return [RunEvent(r["at"], r["kind"], r["message"]) for r in rows]

    # ------------------------------------------------------------------ costs
    def replace_cost_lines(self, run_id: str, lines: Sequence[CostLine]) -> None:
        """Store a run's cost lines, replacing the previous computation (costs are recomputed)."""
        now = self.clock()
        with self._write() as db:
            db.execute("DELETE FROM cost_lines WHERE run_id = ?", (run_id,))
            db.executemany(
                "INSERT INTO cost_lines (run_id, instance_id, kind, quantity, unit, usd, "
                "on_demand_usd, method, computed_at, usd_exact, on_demand_usd_exact, start_at, "
                "end_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        line.run_id,
                        line.instance_id,
                        line.kind,
                        line.quantity,
                        line.unit,
                        line.usd,
                        line.on_demand_usd,
                        line.method,
                        now,
                        None if line.usd_exact is None else str(line.usd_exact),
                        None if line.on_demand_usd_exact is None else str(line.on_demand_usd_exact),
                        line.start_at,
                        line.end_at,
                    )
                    for line in lines
                ],
            )

    def cost_lines(self, run_id: str) -> list[CostLine]:
        rows = self._db.execute("SELECT * FROM cost_lines WHERE run_id = ? ORDER BY id", (run_id,))
        return [
            CostLine(
                run_id=r["run_id"],
                kind=r["kind"],
                quantity=r["quantity"],
                unit=r["unit"],
                usd=r["usd"],
                method=r["method"],
                instance_id=r["instance_id"],
                on_demand_usd=r["on_demand_usd"],
                usd_exact=parse_fraction(r["usd_exact"]),
                on_demand_usd_exact=parse_fraction(r["on_demand_usd_exact"]),
                start_at=r["start_at"],
                end_at=r["end_at"],
            )
            for r in rows
        ]

    def run_cost_exact(self, run_id: str) -> Fraction:
        """The sum of the run's stored lines, exact (lines from before v2 count as stored)."""
        return sum((line.amount for line in self.cost_lines(run_id)), Fraction(0))

    def run_cost_usd(self, run_id: str) -> float:
        return float(self.run_cost_exact(run_id))


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
