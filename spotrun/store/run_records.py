"""What the ledger hands out: a run, its transitions, instances, cost lines and events, as
frozen records (and the row mapping of a run)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spotrun.cloud.base import Plan
from spotrun.core.lazy import lazy_module
from spotrun.core.runstates import TERMINAL, RunState

if TYPE_CHECKING:
    from spotrun.core import config
    from spotrun.core.config import LaunchSpec
else:  # the settings models import pydantic (~100 ms); listing runs never needs them
    config = lazy_module("spotrun.core.config")


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
    spec_json: str  # parsed into .spec on first use
    plan: Plan | None
    run_dir: Path
    last_metrics: dict[str, Any]
    message: str | None
    sweep_id: str | None
    supervisor_pid: int | None
    stop_requested: bool

    @cached_property
    def spec(self) -> LaunchSpec:
        return config.LaunchSpec.model_validate_json(self.spec_json)

    @property
    def job_command(self) -> str | None:
        """The bash command the run's job runs (`spec.job.run`; None for a recipe or argv),
        read from the stored spec as it was validated at launch: `status` shows it, and
        validating the spec again costs pydantic's import (~100 ms)."""
        job = json.loads(self.spec_json).get("job") or {}
        command = job.get("run")
        return command if isinstance(command, str) and command.strip() else None

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
    return os.urandom(6).hex()  # what secrets.token_hex does, without importing hmac


def parse_fraction(text: str | None) -> Fraction | None:
    return Fraction(text) if text is not None else None


def run_from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"],
        name=row["name"],
        recipe=row["recipe"],
        cloud=row["cloud"],
        state=RunState(row["state"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        spec_json=row["spec_json"],
        plan=Plan.from_dict(json.loads(row["plan_json"])) if row["plan_json"] else None,
        run_dir=Path(row["run_dir"]),
        last_metrics=json.loads(row["last_metrics_json"] or "{}"),
        message=row["message"],
        sweep_id=row["sweep_id"],
        supervisor_pid=row["supervisor_pid"],
        stop_requested=bool(row["stop_requested"]),
    )
