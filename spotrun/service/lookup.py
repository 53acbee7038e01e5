"""Opening the ledger and reading runs from it: what `ls`, `status` and shell completion need.

Apart from spotrun.service.runs (which re-exports these) so that reading runs imports nothing
of launching them: no recipes, clouds, plans or tmux, and `spotrun ls` answers fast.
"""

from __future__ import annotations

import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from spotrun.core.home import CONFIG_FILE, default_home
from spotrun.cost.settled import settled_cost
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepStore
from spotrun.train.device_record import read_record

if TYPE_CHECKING:
    from spotrun.core.config import Settings


def open_ledger(settings: Settings | None = None, *, reconcile: bool = True) -> Ledger:
    """Open the ledger; by default also restart supervisors of live runs that lost theirs."""
    ledger = Ledger(settings) if settings is not None else _home_ledger()
    if reconcile and (ledger.active_runs() or SweepStore(ledger).live()):
        # Run control (locks, processes, the controller) is imported only when something is
        # live to check on: listing finished runs stays light (`spotrun ls`, bench/cli_startup.py)
        from spotrun.drive import supervisor
        from spotrun.drive.revive import ensure_sweeps_supervised

        live_sweeps = ensure_sweeps_supervised(ledger)  # sweeps first: they drive their trials
        supervisor.ensure_supervised(ledger, live_sweeps)
    return ledger


def _home_ledger() -> Ledger:
    """The ledger of SPOTRUN_HOME. A config.toml there is read (and checked) now, so that a
    typo in it is an error of every command; without one, the settings (all defaults) are
    made only if something asks for them: listing finished runs needs none, and skips the
    settings models' pydantic import (~100 ms)."""
    home = default_home().absolute()
    if (home / CONFIG_FILE).exists():
        from spotrun.core.config import load_settings  # pydantic, see above

        return Ledger(load_settings(home))
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
    # a live run (or one not settled yet) is priced from its instances: the billing rules and
    # price cache are imported only then
    from spotrun.cost.bills import run_cost

    return run_cost(ledger, run)


def _device(run: RunRecord) -> dict[str, Any] | None:
    """The device the run trained on and what auto chose there (device.json), None if none."""
    record = read_record(run.run_dir)
    return None if record is None else record.to_dict()


def _staging(run: RunRecord) -> dict[str, Any] | None:
    """Time and bytes the run spent staging remote data (s3://, snapshot:), None if none."""
    found = staging_summary(run)
    return None if found is None else found.to_dict()


def staging_summary(run: RunRecord) -> Any:
    # read on first use: a plain `spotrun ls` imports no staging code (test_startup_imports.py)
    from spotrun.datasets.record import summary

    return summary(run.run_dir)


def as_float(amount: Fraction | None) -> float | None:
    return None if amount is None else round(float(amount), 6)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
