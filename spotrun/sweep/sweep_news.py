"""A sweep's news for spotrun.notify: its end with its best trial, and a trial pruned."""

from __future__ import annotations

import sqlite3

from spotrun.core.errors import SpotrunError
from spotrun.notify.announce import announce_pruned, announce_sweep_end
from spotrun.store.ledger import Ledger, RunRecord
from spotrun.store.sweeps import SweepRecord
from spotrun.sweep.board import leaderboard


def tell_end(ledger: Ledger, sweep: SweepRecord) -> None:
    """Queue the sweep's end (once it is recorded), with its best trial."""
    announce_sweep_end(
        ledger,
        sweep.id,
        sweep.name,
        sweep.state.value,
        sweep.message or "",
        best_trial(ledger, sweep),
    )


def tell_pruned(ledger: Ledger, sweep: SweepRecord, run: RunRecord, reason: str) -> None:
    announce_pruned(ledger, sweep.id, sweep.name, run.name, reason)


def best_trial(ledger: Ledger, sweep: SweepRecord) -> str | None:
    """The leader in words (its run, the metric's best value, its params), or None."""
    try:
        entries = leaderboard(ledger, sweep)
    except (SpotrunError, sqlite3.Error, OSError):  # the news goes out without its leader
        return None
    top = entries[0] if entries and entries[0].rank == 1 else None
    if top is None or top.run is None:
        return None
    params = ", ".join(f"{k}={v}" for k, v in top.trial.params.items())
    return f"{top.run.name} {sweep.spec.metric}={top.best:.4g} ({params})"
