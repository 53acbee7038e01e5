"""Opening the ledger and reading runs from it: what `ls`, `status` and shell completion need.

Apart from spotrun.service.runs (which re-exports these) so that reading runs imports nothing
of launching them: no recipes, clouds, plans or tmux, and `spotrun ls` answers fast.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from spotrun.core.home import CONFIG_FILE, default_home
from spotrun.core.lazy import lazy_module
from spotrun.cost.settled import settled_cost
from spotrun.store.ledger import (
    CostLine,
    InstanceRecord,
    Ledger,
    RunEvent,
    RunRecord,
    Transition,
)
from spotrun.store.sweeps import SweepStore
from spotrun.train.device_record import read_record

if TYPE_CHECKING:
    from spotrun.core import config
    from spotrun.core.config import Settings
    from spotrun.cost import bills
    from spotrun.datasets import record as staging_record
    from spotrun.drive import revive, supervisor
else:
    # `spotrun ls` of finished runs imports none of these (test_startup_imports.py)
    config = lazy_module("spotrun.core.config")  # pydantic (~100 ms): a config.toml only
    supervisor = lazy_module("spotrun.drive.supervisor")  # run control: live runs only
    revive = lazy_module("spotrun.drive.revive")
    bills = lazy_module("spotrun.cost.bills")  # billing rules, price cache: live runs only
    staging_record = lazy_module("spotrun.datasets.record")


def open_ledger(settings: Settings | None = None, *, reconcile: bool = True) -> Ledger:
    """Open the ledger; by default also restart supervisors of live runs that lost theirs."""
    ledger = Ledger(settings) if settings is not None else _home_ledger()
    if reconcile and (ledger.active_runs() or SweepStore(ledger).live()):
        # sweeps first: they drive their trials
        live_sweeps = revive.ensure_sweeps_supervised(ledger)
        supervisor.ensure_supervised(ledger, live_sweeps)
    return ledger


def _home_ledger() -> Ledger:
    """The ledger of SPOTRUN_HOME. A config.toml there is read (and checked) now, so that a
    typo in it is an error of every command; without one, the settings (all defaults) are
    made only if something asks for them: listing finished runs needs none, and skips the
    settings models' pydantic import (~100 ms)."""
    home = default_home().absolute()
    if (home / CONFIG_FILE).exists():
        return Ledger(config.load_settings(home))
    return Ledger(home=home)


def run_summary(ledger: Ledger, run: RunRecord) -> dict[str, Any]:
    """The machine-readable row of `ls --json` and the head of `status --json`."""
    return {
        "id": run.id,
        "name": run.name,
        "recipe": run.recipe,
        "cloud": run.cloud,
        "state": run.state.value,
        "created": iso(run.created_at),
        "started": iso(run.started_at),
        "ended": iso(run.ended_at),
        "duration_s": round(run.duration_s(), 3),
        "cost_usd": as_float(_cost(ledger, run)),
        "metrics": run.last_metrics,
        "message": run.message,
        "sweep_id": run.sweep_id,
        "staging": _staging(run),
        "device": _device(run),
    }


def _cost(ledger: Ledger, run: RunRecord) -> Fraction | None:
    settled = settled_cost(ledger, run)
    if settled is not None:
        return settled
    # a live run (or one not settled yet) is priced from its instances
    return bills.run_cost(ledger, run)


def _device(run: RunRecord) -> dict[str, Any] | None:
    """The device the run trained on and what auto chose there (device.json), None if none."""
    record = read_record(run.run_dir)
    return None if record is None else record.to_dict()


def _staging(run: RunRecord) -> dict[str, Any] | None:
    """Time and bytes the run spent staging remote data (s3://, snapshot:), None if none."""
    found = staging_summary(run)
    return None if found is None else found.to_dict()


def staging_summary(run: RunRecord) -> Any:
    return staging_record.summary(run.run_dir)


def as_float(amount: Fraction | None) -> float | None:
    return None if amount is None else round(float(amount), 6)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


@dataclass(frozen=True)
class RunStatus:
    run: RunRecord
    transitions: list[Transition]
    instances: list[InstanceRecord]
    events: list[RunEvent]
    cost_lines: list[CostLine]
    cost_usd: float | None  # so far, for a live run; None when it cannot be priced yet
    supervised: bool


def run_status(ledger: Ledger, ref: str) -> RunStatus:
    """One run as `spotrun status` shows it (here, not in service.runs: status is polled
    often, by people and scripts, and needs none of the launch machinery)."""
    run = ledger.resolve(ref)
    return RunStatus(
        run=run,
        transitions=ledger.transitions(run.id),
        instances=ledger.instances(run.id),
        events=ledger.events(run.id),
        cost_lines=ledger.cost_lines(run.id),
        cost_usd=as_float(bills.run_cost(ledger, run)),
        supervised=supervisor.is_supervised(run),
    )
