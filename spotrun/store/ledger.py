"""The ledger: spotrun's one store of local state (SQLite in WAL mode under SPOTRUN_HOME).

Runs, every state transition with its time, instances, run events, cost lines and cached spot
price points. Several spotrun processes (the CLI, run supervisors) share it; every state change
is a compare-and-set inside one IMMEDIATE transaction, so two writers never both win a move.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from spotrun.core.config import LaunchSpec, Settings
from spotrun.core.errors import LedgerBusyError, LedgerError, NotFoundError, UsageError
from spotrun.core.runstates import TERMINAL, RunState, check_transition

SCHEMA_VERSION = 3
APP_ID = "spotrun-ledger"
# A busy ledger (another process holds its write lock: a long CLI write, a backup, a user's
# sqlite3 shell) is transient. Each statement waits BUSY_WAIT_S inside SQLite, and is tried
# again until BUSY_BOUND_S have passed; only then is it a LedgerBusyError. No run is torn down
# for it (the controller retries its step).
BUSY_WAIT_S = 5.0
BUSY_BOUND_S = 600.0


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc)
    return "malformed" in text or "not a database" in text or "corrupt" in text


def _damaged(where: str, exc: sqlite3.DatabaseError) -> LedgerError:
    return LedgerError(
        f"{where} is not a readable spotrun ledger: it is damaged ({exc})",
        hint=f"move it aside (mv {where} {where}.bad) and spotrun starts a new one; "
        f"`sqlite3 {where}.bad .recover` may save what it held",
    )


class _BusyRetryConnection(sqlite3.Connection):
    """The ledger's connection: the one place that waits out a busy database.

    A statement outside a transaction (autocommit, BEGIN) or a COMMIT that meets a lock held by
    another process is tried again, with a bound; a statement inside an open transaction is
    not (this connection holds the write lock there, and a retry could not be correct)."""

    bound_s: float = BUSY_BOUND_S
    where: str = "the ledger"  # its path, for messages

    def _retrying(self, sql: str, call: Callable[[], sqlite3.Cursor]) -> sqlite3.Cursor:
        retriable = not self.in_transaction or sql.lstrip().upper().startswith("COMMIT")
        deadline = time.monotonic() + self.bound_s
        while True:
            try:
                return call()
            except sqlite3.OperationalError as exc:
                if _is_damage(exc):
                    raise _damaged(self.where, exc) from exc
                if not (retriable and _is_busy(exc)):
                    raise
                if time.monotonic() >= deadline:
                    raise LedgerBusyError(
                        f"the ledger stayed locked by another process for over "
                        f"{self.bound_s:.0f} s ({exc})",
                        hint="find the process holding it (fuser ledger.db) and let it finish",
                    ) from exc
            except sqlite3.DatabaseError as exc:
                if _is_damage(exc):
                    raise _damaged(self.where, exc) from exc
                raise

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self._retrying(
            sql, lambda: super(_BusyRetryConnection, self).execute(sql, parameters)
        )

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        rows = list(parameters)  # an iterator could not be read twice
        return self._retrying(sql, lambda: super(_BusyRetryConnection, self).executemany(sql, rows))


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    recipe TEXT NOT NULL,
    cloud TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    spec_json TEXT NOT NULL,
    plan_json TEXT,
    run_dir TEXT NOT NULL,
    last_metrics_json TEXT,
    message TEXT,
    sweep_id TEXT,
    supervisor_pid INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    from_state TEXT,
    to_state TEXT NOT NULL,
    at REAL NOT NULL,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS transitions_by_run ON transitions(run_id, id);
CREATE TABLE IF NOT EXISTS instances (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    provider TEXT NOT NULL,
    region TEXT,
    zone TEXT,
    instance_type TEXT NOT NULL,
    market TEXT NOT NULL,
    node_index INTEGER NOT NULL DEFAULT 0,
    address TEXT,
    state TEXT NOT NULL,
    launched_at REAL,
    terminated_at REAL,
    end_reason TEXT,
    details_json TEXT
);
CREATE INDEX IF NOT EXISTS instances_by_run ON instances(run_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_run ON events(run_id, id);
CREATE TABLE IF NOT EXISTS cost_lines (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    instance_id TEXT,
    kind TEXT NOT NULL,
    quantity REAL NOT NULL,
    unit TEXT NOT NULL,
    usd REAL NOT NULL,
    on_demand_usd REAL,
    method TEXT NOT NULL,
    computed_at REAL NOT NULL,
    usd_exact TEXT,
    on_demand_usd_exact TEXT,
    start_at REAL,
    end_at REAL
);
CREATE INDEX IF NOT EXISTS cost_lines_by_run ON cost_lines(run_id);
CREATE TABLE IF NOT EXISTS price_points (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    at REAL NOT NULL,
    usd_per_hour REAL NOT NULL,
    PRIMARY KEY (region, zone, instance_type, at)
);
CREATE TABLE IF NOT EXISTS price_coverage (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    start_at REAL NOT NULL,
    end_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS price_coverage_by_series ON price_coverage(region, zone, instance_type);
CREATE TABLE IF NOT EXISTS on_demand_prices (
    region TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    usd_per_hour REAL,
    fetched_at REAL NOT NULL,
    PRIMARY KEY (region, instance_type)
);
"""

# v3 (sweeps): a sweep, its trials (each becomes a run), and packs: instances a sweep shares
# between trials, one GPU each, with every stay of a trial on one (what splits their cost).
_SWEEP_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    recipe TEXT NOT NULL,
    cloud TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    ended_at REAL,
    spec_json TEXT NOT NULL,
    plan_json TEXT,
    message TEXT,
    supervisor_pid INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    sweep_dir TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweep_trials (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    idx INTEGER NOT NULL,
    params_json TEXT NOT NULL,
    run_id TEXT REFERENCES runs(id),
    status TEXT NOT NULL,
    reason TEXT,
    pack_id TEXT,
    PRIMARY KEY (sweep_id, idx)
);
CREATE INDEX IF NOT EXISTS sweep_trials_by_run ON sweep_trials(run_id);
CREATE TABLE IF NOT EXISTS packs (
    id TEXT PRIMARY KEY,
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    offer_json TEXT NOT NULL,
    slots INTEGER NOT NULL,
    state TEXT NOT NULL,
    created_at REAL NOT NULL,
    ended_at REAL
);
CREATE TABLE IF NOT EXISTS pack_instances (
    id TEXT PRIMARY KEY,
    pack_id TEXT NOT NULL REFERENCES packs(id),
    provider TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    market TEXT NOT NULL,
    region TEXT,
    zone TEXT,
    launched_at REAL,
    terminated_at REAL,
    end_reason TEXT
);
CREATE TABLE IF NOT EXISTS pack_stays (
    id INTEGER PRIMARY KEY,
    pack_id TEXT NOT NULL REFERENCES packs(id),
    instance_id TEXT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs(id),
    gpu_index INTEGER NOT NULL,
    seat_id TEXT NOT NULL UNIQUE,
    joined_at REAL NOT NULL,
    left_at REAL
);
CREATE INDEX IF NOT EXISTS pack_stays_by_instance ON pack_stays(instance_id);
CREATE INDEX IF NOT EXISTS pack_stays_by_run ON pack_stays(run_id);
"""

# Each step takes a ledger of the version before it to its own version; a fresh ledger gets
# _SCHEMA (the latest) directly.
_MIGRATIONS: dict[int, str] = {
    # v2: exact amounts and billed periods on cost lines; which spans of spot price history
    # the cache holds in full; cached on-demand prices.
    2: """
ALTER TABLE cost_lines ADD COLUMN usd_exact TEXT;
ALTER TABLE cost_lines ADD COLUMN on_demand_usd_exact TEXT;
ALTER TABLE cost_lines ADD COLUMN start_at REAL;
ALTER TABLE cost_lines ADD COLUMN end_at REAL;
CREATE TABLE IF NOT EXISTS price_coverage (
    region TEXT NOT NULL,
    zone TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    start_at REAL NOT NULL,
    end_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS price_coverage_by_series ON price_coverage(region, zone, instance_type);
CREATE TABLE IF NOT EXISTS on_demand_prices (
    region TEXT NOT NULL,
    instance_type TEXT NOT NULL,
    usd_per_hour REAL,
    fetched_at REAL NOT NULL,
    PRIMARY KEY (region, instance_type)
);
""",
    3: _SWEEP_SCHEMA,
}


@dataclass(frozen=True)
class RunRecord:
    id: str
    name: str
    recipe: str
    cloud: str
    state: RunState
    created_at: float
    started_at: float | None
    ended_at: float | None
    spec: LaunchSpec
    plan: dict[str, Any] | None
    run_dir: Path
    last_metrics: dict[str, Any]
    message: str | None
    sweep_id: str | None
    supervisor_pid: int | None
    stop_requested: bool

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL

    def duration_s(self, now: float | None = None) -> float:
        start = self.started_at or self.created_at
        end = self.ended_at if self.ended_at is not None else (now or time.time())
        return max(0.0, end - start)


@dataclass(frozen=True)
class Transition:
    from_state: RunState | None
    to_state: RunState
    at: float
    reason: str | None


@dataclass(frozen=True)
class InstanceRecord:
    id: str
    run_id: str
    provider: str
    instance_type: str
    market: str
    state: str
    region: str | None = None
    zone: str | None = None
    node_index: int = 0
    address: str | None = None
    launched_at: float | None = None
    terminated_at: float | None = None
    end_reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CostLine:
    run_id: str
    kind: str  # "compute", "storage", "staging", ...
    quantity: float
    unit: str  # "instance-s", "GB-month", ...
    usd: float
    method: str
    instance_id: str | None = None
    on_demand_usd: float | None = None
    # The exact amounts (usd/on_demand_usd are these as floats, for quick reading).
    usd_exact: Fraction | None = None
    on_demand_usd_exact: Fraction | None = None
    start_at: float | None = None  # the billed period
    end_at: float | None = None

    @property
    def amount(self) -> Fraction:
        return self.usd_exact if self.usd_exact is not None else Fraction(repr(self.usd))


@dataclass(frozen=True)
class RunEvent:
    at: float
    kind: str
    message: str


def new_run_id() -> str:
    """12 lowercase hex characters: short enough to type a prefix of, unique in practice."""
    return secrets.token_hex(6)


class Ledger:
    """Handle on the ledger database. Cheap to open; open one per process."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.clock = clock  # stamps every time the ledger records (a fixed one for imports, tests)
        self.path = settings.ledger_path
        _ensure_writable_home(settings.home)
        _keep_private(self.path)
        try:
            self._db = sqlite3.connect(
                self.path,
                timeout=BUSY_WAIT_S,
                isolation_level=None,
                factory=_BusyRetryConnection,
            )
            self._db.row_factory = sqlite3.Row
            self._db.where = str(self.path)
            self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_WAIT_S * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
            _keep_private(self.path)  # the -wal and -shm SQLite just made
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
                _run_script(self._db, _SCHEMA)
                _run_script(self._db, _SWEEP_SCHEMA)
            else:  # an older ledger: step it up, keeping everything it holds
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    _run_script(self._db, _MIGRATIONS[step])
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
        plan: dict[str, Any] | None = None,
        sweep_id: str | None = None,
    ) -> RunRecord:
        run_id = run_id or new_run_id()
        name = spec.name or f"{spec.recipe}-{run_id[:6]}"
        run_dir = self.settings.runs_dir / run_id
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
                    json.dumps(plan) if plan is not None else None,
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
        return _run_from_row(row)

    def resolve(self, ref: str) -> RunRecord:
        """A run by exact name, exact id, or unique id prefix."""
        ref = ref.strip()
        if not ref:
            raise NotFoundError("an empty run reference matches no run")
        row = self._db.execute("SELECT * FROM runs WHERE name = ? OR id = ?", (ref, ref)).fetchone()
        if row is not None:
            return _run_from_row(row)
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
        return _run_from_row(rows[0])

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
        rows = [_run_from_row(r) for r in self._db.execute(query + " ORDER BY created_at", params)]
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
        return [_run_from_row(r) for r in rows]

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

    def set_plan(self, run_id: str, plan: dict[str, Any]) -> None:
        self._update(run_id, plan_json=json.dumps(plan))

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
                usd_exact=_fraction(r["usd_exact"]),
                on_demand_usd_exact=_fraction(r["on_demand_usd_exact"]),
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

    # ----------------------------------------------------------- price cache
    def store_price_points(
        self,
        region: str,
        zone: str,
        instance_type: str,
        points: Sequence[tuple[float, float]],
        *,
        covered: tuple[float, float] | None = None,
    ) -> None:
        """Cache price points; `covered` says the cache now holds every point in that span."""
        with self._write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO price_points VALUES (?, ?, ?, ?, ?)",
                [(region, zone, instance_type, at, usd) for at, usd in points],
            )
            if covered is None:
                return
            start, end = covered
            key = (region, zone, instance_type)
            touching = db.execute(
                "SELECT rowid, start_at, end_at FROM price_coverage WHERE region = ? AND zone = ? "
                "AND instance_type = ? AND end_at >= ? AND start_at <= ?",
                (*key, start, end),
            ).fetchall()
            for row in touching:  # merge into one span
                start, end = min(start, row["start_at"]), max(end, row["end_at"])
                db.execute("DELETE FROM price_coverage WHERE rowid = ?", (row["rowid"],))
            db.execute("INSERT INTO price_coverage VALUES (?, ?, ?, ?, ?)", (*key, start, end))

    def price_points(
        self,
        region: str,
        zone: str,
        instance_type: str,
        *,
        start: float | None = None,
        end: float | None = None,
    ) -> list[tuple[float, float]]:
        """Cached points in order; with start, only from the last one at or before it."""
        key = (region, zone, instance_type)
        where = "region = ? AND zone = ? AND instance_type = ?"
        params: list[Any] = list(key)
        if start is not None:
            where += (
                " AND at >= COALESCE((SELECT MAX(at) FROM price_points WHERE region = ? "
                "AND zone = ? AND instance_type = ? AND at <= ?), ?)"
            )
            params += [*key, start, start]
        if end is not None:
            where += " AND at <= ?"
            params.append(end)
        rows = self._db.execute(
            f"SELECT at, usd_per_hour FROM price_points WHERE {where} ORDER BY at", params
        )
        return [(r["at"], r["usd_per_hour"]) for r in rows]

    def price_coverage(
        self, region: str, zone: str, instance_type: str
    ) -> list[tuple[float, float]]:
        """Spans (start, end) over which the cache holds every price point, in order."""
        rows = self._db.execute(
            "SELECT start_at, end_at FROM price_coverage WHERE region = ? AND zone = ? "
            "AND instance_type = ? ORDER BY start_at",
            (region, zone, instance_type),
        )
        return [(r["start_at"], r["end_at"]) for r in rows]

    def store_on_demand_price(
        self, region: str, instance_type: str, usd_per_hour: float | None
    ) -> None:
        """Cache an on-demand price; None records that the source had none."""
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO on_demand_prices VALUES (?, ?, ?, ?)",
                (region, instance_type, usd_per_hour, self.clock()),
            )

    def on_demand_price(self, region: str, instance_type: str) -> tuple[float | None, float] | None:
        """(price or None, when it was fetched), or None if it never was."""
        row = self._db.execute(
            "SELECT usd_per_hour, fetched_at FROM on_demand_prices WHERE region = ? "
            "AND instance_type = ?",
            (region, instance_type),
        ).fetchone()
        return None if row is None else (row["usd_per_hour"], row["fetched_at"])


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Statements one by one: executescript would commit the open transaction."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _fraction(text: str | None) -> Fraction | None:
    return Fraction(text) if text is not None else None


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"


def _run_from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        name=row["name"],
        recipe=row["recipe"],
        cloud=row["cloud"],
        state=RunState(row["state"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        spec=LaunchSpec.model_validate_json(row["spec_json"]),
        plan=json.loads(row["plan_json"]) if row["plan_json"] else None,
        run_dir=Path(row["run_dir"]),
        last_metrics=json.loads(row["last_metrics_json"] or "{}"),
        message=row["message"],
        sweep_id=row["sweep_id"],
        supervisor_pid=row["supervisor_pid"],
        stop_requested=bool(row["stop_requested"]),
    )


def _keep_private(db_path: Path) -> None:
    """The ledger holds what runs were given (a resume needs its --env values): 0600, with its
    -wal and -shm, made so before SQLite writes a byte (an older ledger is tightened here)."""
    try:
        # Never open (and close) an existing ledger file here: closing any descriptor of it
        # drops every POSIX lock this process holds on it, those of its other connections too.
        if not db_path.exists():
            with contextlib.suppress(FileExistsError):
                os.close(os.open(db_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        for path in (db_path, Path(f"{db_path}-wal"), Path(f"{db_path}-shm")):
            if path.exists() and path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
    except OSError as exc:
        raise LedgerError(
            f"cannot make the ledger at {db_path} private: {exc.strerror or exc}",
            hint="fix its permissions or set SPOTRUN_HOME to a folder you own",
        ) from exc


def _ensure_writable_home(home: Path) -> None:
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        if home.stat().st_uid == os.getuid() and home.stat().st_mode & 0o077:
            os.chmod(home, 0o700)  # run folders, logs and the ledger: the user's alone
        (home / "runs").mkdir(exist_ok=True)
    except OSError as exc:
        raise LedgerError(
            f"cannot create SPOTRUN_HOME at {home}: {exc.strerror or exc}",
            hint="set SPOTRUN_HOME to a folder you can write",
        ) from exc
    # A real write, not os.access: root passes os.access on a read-only mount.
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=home)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise LedgerError(
            f"SPOTRUN_HOME at {home} is not writable: {exc.strerror or exc}",
            hint="fix its permissions or set SPOTRUN_HOME to a folder you can write",
        ) from exc
