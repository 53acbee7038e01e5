"""Sweeps, their trials and packs in the ledger (schema v3 tables, see spotrun.store.ledger).

The same SQLite file and the same IMMEDIATE transactions as runs: a sweep supervisor, its trial
threads and the CLI read and write it side by side.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cloud.base import Offer
from spotrun.core.errors import NotFoundError, StateError
from spotrun.core.lazy import lazy_module
from spotrun.store.ledger import Ledger
from spotrun.store.name_reuse import free_sweep_name, name_note

if TYPE_CHECKING:
    from spotrun.store import sweep_spec
    from spotrun.store.sweep_spec import SweepSpec
else:  # the spec models import pydantic (~100 ms); `spotrun ls` never needs them
    sweep_spec = lazy_module("spotrun.store.sweep_spec")


SWEEPS_FOLDER = "sweeps"  # under SPOTRUN_HOME: one folder per sweep, named by its id


class SweepState(str, Enum):
    RUNNING = "running"
    COMPLETED = "completed"  # every trial ran to its end (or was stopped early by ASHA)
    STOPPED = "stopped"  # by the user, or by the budget (the message says which)
    FAILED = "failed"

    def __str__(self) -> str:
        return self.value


class TrialStatus(str, Enum):
    PENDING = "pending"  # not launched yet
    LAUNCHED = "launched"  # a run exists; its state says the rest
    PRUNED = "pruned"  # launched, then stopped early by ASHA
    SKIPPED = "skipped"  # never launched: the sweep was stopped (by its user or its budget)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SweepRecord:
    id: str
    name: str
    recipe: str
    cloud: str
    state: SweepState
    created_at: float
    ended_at: float | None
    spec_json: str  # parsed into .spec on first use
    plan: dict[str, Any] | None
    message: str | None
    supervisor_pid: int | None
    stop_requested: bool
    sweep_dir: Path

    @cached_property
    def spec(self) -> SweepSpec:
        return sweep_spec.SweepSpec.model_validate_json(self.spec_json)

    @property
    def is_over(self) -> bool:
        return self.state is not SweepState.RUNNING


@dataclass(frozen=True)
class TrialRecord:
    sweep_id: str
    index: int
    params: dict[str, str]
    run_id: str | None
    status: TrialStatus
    reason: str | None
    pack_id: str | None  # the pack it runs in, when the sweep packs trials


@dataclass(frozen=True)
class PackRecord:
    id: str
    sweep_id: str
    offer: Offer
    trials_per_instance: int  # the column is `slots`: its on-disk name, kept for old ledgers
    state: str  # "open" (trials may join) or "closed" (its instance terminated)
    created_at: float
    ended_at: float | None


@dataclass(frozen=True)
class PackInstance:
    id: str
    pack_id: str
    provider: str
    instance_type: str
    market: str
    region: str | None
    zone: str | None
    launched_at: float | None
    terminated_at: float | None
    end_reason: str | None


@dataclass(frozen=True)
class Share:
    """One trial's share of one pack instance: its GPU (or G GPUs from gpu_index on), from
    joined_at until left_at. The trial's run knows it as an instance whose id is the share's."""

    id: str  # "INSTANCE/RUN" (one per trial per pack instance)
    pack_id: str
    instance_id: str
    run_id: str
    gpu_index: int
    joined_at: float
    left_at: float | None


class SweepStore:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @property
    def db(self) -> sqlite3.Connection:
        return self.ledger.db  # the ledger's current connection (it may open a new one)

    # ---------------------------------------------------------------- sweeps
    def create(
        self, spec: SweepSpec, trials: list[dict[str, str]], plan: dict[str, Any]
    ) -> SweepRecord:
        sweep_id = "s" + os.urandom(5).hex()
        name = spec.name or f"{spec.recipe}-sweep-{sweep_id[1:7]}"
        sweep_dir = self.ledger.settings.home / SWEEPS_FOLDER / sweep_id
        now = self.ledger.clock()
        with self.ledger.write() as db:
            moved = free_sweep_name(db, name)  # the newest sweep takes the name
            db.execute(
                "INSERT INTO sweeps (id, name, recipe, cloud, state, created_at, spec_json, "
                "plan_json, sweep_dir, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sweep_id,
                    name,
                    spec.recipe,
                    spec.cloud,
                    SweepState.RUNNING.value,
                    now,
                    spec.model_dump_json(),
                    json.dumps(plan),
                    str(sweep_dir),
                    name_note("sweep", name, moved) if moved is not None else None,
                ),
            )
            db.executemany(
                "INSERT INTO sweep_trials (sweep_id, idx, params_json, status) VALUES (?, ?, ?, ?)",
                [
                    (sweep_id, i, json.dumps(params), TrialStatus.PENDING.value)
                    for i, params in enumerate(trials)
                ],
            )
        sweep_dir.mkdir(parents=True, exist_ok=True)
        return self.get(sweep_id)

    def get(self, sweep_id: str) -> SweepRecord:
        row = self.db.execute("SELECT * FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no sweep with id '{sweep_id}'")
        return _sweep(row)

    def resolve(self, ref: str) -> SweepRecord:
        """A sweep by name, id or unique id prefix."""
        ref = ref.strip()
        row = self.db.execute(
            "SELECT * FROM sweeps WHERE name = ? OR id = ?", (ref, ref)
        ).fetchone()
        if row is not None:
            return _sweep(row)
        escaped = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = self.db.execute(
            "SELECT * FROM sweeps WHERE id LIKE ? ESCAPE '\\'", (escaped + "%",)
        ).fetchall()
        if len(rows) == 1 and ref:
            return _sweep(rows[0])
        if len(rows) > 1 and ref:
            raise NotFoundError(f"'{ref}' starts {len(rows)} sweep ids", hint="type more of it")
        raise NotFoundError(
            f"no sweep named '{ref}' and no sweep id starts with it",
            hint="`spotrun sweep ls` lists every sweep",
        )

    def all(self) -> list[SweepRecord]:
        return [_sweep(r) for r in self.db.execute("SELECT * FROM sweeps ORDER BY created_at")]

    def live(self) -> list[SweepRecord]:
        rows = self.db.execute(
            "SELECT * FROM sweeps WHERE state = ? ORDER BY created_at",
            (SweepState.RUNNING.value,),
        )
        return [_sweep(r) for r in rows]

    def end(self, sweep_id: str, state: SweepState, message: str) -> SweepRecord:
        with self.ledger.write() as db:
            row = db.execute("SELECT state FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
            if row is None:
                raise NotFoundError(f"no sweep with id '{sweep_id}'")
            if row["state"] != SweepState.RUNNING.value:
                raise StateError(f"sweep {sweep_id} has already ended ({row['state']})")
            db.execute(
                "UPDATE sweeps SET state = ?, ended_at = ?, message = ? WHERE id = ?",
                (state.value, self.ledger.clock(), message, sweep_id),
            )
        return self.get(sweep_id)

    def set_supervisor(self, sweep_id: str, pid: int | None) -> None:
        self._update(sweep_id, supervisor_pid=pid)

    def request_stop(self, sweep_id: str, message: str) -> None:
        self._update(sweep_id, stop_requested=1, message=message)

    def set_message(self, sweep_id: str, message: str) -> None:
        self._update(sweep_id, message=message)

    def _update(self, sweep_id: str, **columns: Any) -> None:
        assignments = ", ".join(f"{name} = ?" for name in columns)
        with self.ledger.write() as db:
            db.execute(
                f"UPDATE sweeps SET {assignments} WHERE id = ?", (*columns.values(), sweep_id)
            )

    # ---------------------------------------------------------------- trials
    def trials(self, sweep_id: str) -> list[TrialRecord]:
        rows = self.db.execute(
            "SELECT * FROM sweep_trials WHERE sweep_id = ? ORDER BY idx", (sweep_id,)
        )
        return [_trial(r) for r in rows]

    def trial_of_run(self, run_id: str) -> TrialRecord | None:
        row = self.db.execute("SELECT * FROM sweep_trials WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _trial(row)

    def mark(
        self,
        sweep_id: str,
        index: int,
        status: TrialStatus,
        *,
        run_id: str | None = None,
        reason: str | None = None,
        pack_id: str | None = None,
    ) -> None:
        with self.ledger.write() as db:
            db.execute(
                "UPDATE sweep_trials SET status = ?, run_id = COALESCE(?, run_id), "
                "reason = COALESCE(?, reason), pack_id = COALESCE(?, pack_id) "
                "WHERE sweep_id = ? AND idx = ?",
                (status.value, run_id, reason, pack_id, sweep_id, index),
            )

    def set_params(self, sweep_id: str, index: int, params: dict[str, str]) -> None:
        """A pending trial's values, proposed by the sweep's search just before its launch."""
        with self.ledger.write() as db:
            db.execute(
                "UPDATE sweep_trials SET params_json = ? WHERE sweep_id = ? AND idx = ? "
                "AND status = ?",
                (json.dumps(params), sweep_id, index, TrialStatus.PENDING.value),
            )

    # ----------------------------------------------------------------- packs
    def create_pack(self, sweep_id: str, offer: Offer, trials_per_instance: int) -> PackRecord:
        pack_id = "pk" + os.urandom(5).hex()
        with self.ledger.write() as db:
            db.execute(
                "INSERT INTO packs (id, sweep_id, offer_json, slots, state, created_at) "
                "VALUES (?, ?, ?, ?, 'open', ?)",
                (
                    pack_id,
                    sweep_id,
                    json.dumps(offer.to_dict()),
                    trials_per_instance,
                    self.ledger.clock(),
                ),
            )
        return self.pack(pack_id)

    def pack(self, pack_id: str) -> PackRecord:
        row = self.db.execute("SELECT * FROM packs WHERE id = ?", (pack_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no pack with id '{pack_id}'")
        return _pack(row)

    def packs(self, sweep_id: str) -> list[PackRecord]:
        rows = self.db.execute(
            "SELECT * FROM packs WHERE sweep_id = ? ORDER BY created_at", (sweep_id,)
        )
        return [_pack(r) for r in rows]

    def close_pack(self, pack_id: str) -> None:
        with self.ledger.write() as db:
            db.execute(
                "UPDATE packs SET state = 'closed', ended_at = ? WHERE id = ? AND state = 'open'",
                (self.ledger.clock(), pack_id),
            )

    def record_pack_instance(self, inst: PackInstance) -> None:
        with self.ledger.write() as db:
            db.execute(
                "INSERT INTO pack_instances (id, pack_id, provider, instance_type, market, "
                "region, zone, launched_at, terminated_at, end_reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
                "launched_at = COALESCE(excluded.launched_at, launched_at), "
                "terminated_at = COALESCE(terminated_at, excluded.terminated_at), "
                "end_reason = COALESCE(end_reason, excluded.end_reason)",
                (
                    inst.id,
                    inst.pack_id,
                    inst.provider,
                    inst.instance_type,
                    inst.market,
                    inst.region,
                    inst.zone,
                    inst.launched_at,
                    inst.terminated_at,
                    inst.end_reason,
                ),
            )

    def pack_instance(self, instance_id: str) -> PackInstance | None:
        row = self.db.execute(
            "SELECT * FROM pack_instances WHERE id = ?", (instance_id,)
        ).fetchone()
        return None if row is None else _pack_instance(row)

    def pack_instances(self, pack_id: str) -> list[PackInstance]:
        rows = self.db.execute(
            "SELECT * FROM pack_instances WHERE pack_id = ? ORDER BY launched_at", (pack_id,)
        )
        return [_pack_instance(r) for r in rows]

    # ---------------------------------------------------------------- shares
    # Shares are rows of `pack_stays`, a share's id its `seat_id`: on-disk names kept for
    # existing ledgers.
    def join(self, pack_id: str, instance_id: str, run_id: str, trials_per_instance: int) -> Share:
        """Give the run a share of the instance on a free GPU (its open share there if it has
        one)."""
        with self.ledger.write() as db:
            row = db.execute(
                "SELECT * FROM pack_stays WHERE instance_id = ? AND run_id = ? AND left_at IS NULL",
                (instance_id, run_id),
            ).fetchone()
            if row is not None:
                return _share(row)
            taken = {
                r["gpu_index"]
                for r in db.execute(
                    "SELECT gpu_index FROM pack_stays WHERE instance_id = ? AND left_at IS NULL",
                    (instance_id,),
                )
            }
            free = [i for i in range(trials_per_instance) if i not in taken]
            if not free:
                raise StateError(
                    f"every GPU of {instance_id} is taken ({trials_per_instance} trials on it)"
                )
            share_id = f"{instance_id}/{run_id}"
            db.execute(
                "INSERT INTO pack_stays (pack_id, instance_id, run_id, gpu_index, seat_id, "
                "joined_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(seat_id) DO UPDATE SET "
                "left_at = NULL",
                (pack_id, instance_id, run_id, free[0], share_id, self.ledger.clock()),
            )
        share = self.share(share_id)
        assert share is not None
        return share

    def leave(self, share_id: str, at: float | None = None) -> None:
        with self.ledger.write() as db:
            db.execute(
                "UPDATE pack_stays SET left_at = ? WHERE seat_id = ? AND left_at IS NULL",
                (at if at is not None else self.ledger.clock(), share_id),
            )

    def share(self, share_id: str) -> Share | None:
        row = self.db.execute("SELECT * FROM pack_stays WHERE seat_id = ?", (share_id,)).fetchone()
        return None if row is None else _share(row)

    def shares_of_run(self, run_id: str) -> list[Share]:
        rows = self.db.execute("SELECT * FROM pack_stays WHERE run_id = ? ORDER BY id", (run_id,))
        return [_share(r) for r in rows]

    def shares_on(self, instance_id: str) -> list[Share]:
        rows = self.db.execute(
            "SELECT * FROM pack_stays WHERE instance_id = ? ORDER BY id", (instance_id,)
        )
        return [_share(r) for r in rows]

    def shares_in(self, pack_id: str) -> list[Share]:
        rows = self.db.execute("SELECT * FROM pack_stays WHERE pack_id = ? ORDER BY id", (pack_id,))
        return [_share(r) for r in rows]


def _sweep(row: sqlite3.Row) -> SweepRecord:
    return SweepRecord(
        id=row["id"],
        name=row["name"],
        recipe=row["recipe"],
        cloud=row["cloud"],
        state=SweepState(row["state"]),
        created_at=row["created_at"],
        ended_at=row["ended_at"],
        spec_json=row["spec_json"],
        plan=json.loads(row["plan_json"]) if row["plan_json"] else None,
        message=row["message"],
        supervisor_pid=row["supervisor_pid"],
        stop_requested=bool(row["stop_requested"]),
        sweep_dir=Path(row["sweep_dir"]),
    )


def _trial(row: sqlite3.Row) -> TrialRecord:
    return TrialRecord(
        sweep_id=row["sweep_id"],
        index=row["idx"],
        params=json.loads(row["params_json"]),
        run_id=row["run_id"],
        status=TrialStatus(row["status"]),
        reason=row["reason"],
        pack_id=row["pack_id"],
    )


def _pack(row: sqlite3.Row) -> PackRecord:
    return PackRecord(
        id=row["id"],
        sweep_id=row["sweep_id"],
        offer=Offer.from_dict(json.loads(row["offer_json"])),
        trials_per_instance=row["slots"],
        state=row["state"],
        created_at=row["created_at"],
        ended_at=row["ended_at"],
    )


def _pack_instance(row: sqlite3.Row) -> PackInstance:
    return PackInstance(
        id=row["id"],
        pack_id=row["pack_id"],
        provider=row["provider"],
        instance_type=row["instance_type"],
        market=row["market"],
        region=row["region"],
        zone=row["zone"],
        launched_at=row["launched_at"],
        terminated_at=row["terminated_at"],
        end_reason=row["end_reason"],
    )


def _share(row: sqlite3.Row) -> Share:
    return Share(
        id=row["seat_id"],
        pack_id=row["pack_id"],
        instance_id=row["instance_id"],
        run_id=row["run_id"],
        gpu_index=row["gpu_index"],
        joined_at=row["joined_at"],
        left_at=row["left_at"],
    )
