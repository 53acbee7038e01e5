"""Stopping a run: `spotrun stop`'s body, apart from the launch machinery (recipes, plans,
data checks) that spotrun.service.runs, which re-exports it, loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotrun.core.errors import StateError
from spotrun.core.lazy import lazy_module
from spotrun.core.waiting import WaitTimeout, wait_until
from spotrun.drive import supervisor
from spotrun.store.ledger import Ledger, RunRecord

if TYPE_CHECKING:
    from spotrun.control import controller as run_control
    from spotrun.sweep import packs
else:
    # the run controller (36 modules, ssl and http among them) and the run's provider (a
    # pack's share, through the sweep's packs and the agent's tmux sessions) only when no
    # supervisor stops the run
    run_control = lazy_module("spotrun.control.controller")
    packs = lazy_module("spotrun.sweep.packs")


def stop(ledger: Ledger, ref: str, *, timeout_s: float = 120.0) -> RunRecord:
    """Stop a run: checkpoint, sync, terminate, state stopped. Waits until it is done."""
    run = ledger.resolve(ref)
    if run.is_terminal:
        raise StateError(f"run {run.name} has already ended ({run.state.value})")
    ledger.request_stop(run.id)
    if supervisor.is_supervised(run):
        try:
            return wait_until(
                lambda: _ended(ledger, run.id), timeout_s=timeout_s, what=f"run {run.name} to stop"
            )
        except WaitTimeout:
            ledger.add_event(
                run.id,
                "stop",
                f"supervisor did not stop the run in {timeout_s:.0f} s; stopping it here",
            )
    return run_control.RunController(
        ledger, run.id, provider=packs.run_provider(ledger, run)
    ).drive()


def _ended(ledger: Ledger, run_id: str) -> RunRecord | None:
    run = ledger.get_run(run_id)
    return run if run.is_terminal else None
