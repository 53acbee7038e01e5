"""The ledger: spotrun's one store of local state (SQLite in WAL mode under SPOTRUN_HOME).

Runs, every state transition with its time, instances, run events, cost lines and cached spot
price points. Several spotrun processes (the CLI, run supervisors) share it; every state change
is a compare-and-set inside one IMMEDIATE transaction, so two writers never both win a move.

The Ledger is its table groups over one connection (spotrun.store.connection): runs and
transitions (store.runs), instances, events, cost lines (store.costs); the sweep tables
(store.sweeps) and the price cache (store.price_cache) take a Ledger and share its connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from spotrun.core.lazy import lazy_module
from spotrun.store.costs import CostLineTable
from spotrun.store.events import EventTable
from spotrun.store.instances import InstanceTable
from spotrun.store.run_records import (
    CostLine,
    InstanceRecord,
    RunEvent,
    RunRecord,
    Transition,
    new_run_id,
)
from spotrun.store.runs import RunTables
from spotrun.store.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from spotrun.core import config
    from spotrun.core.config import Settings
else:  # the settings models import pydantic (~100 ms); only what needs settings pays it
    config = lazy_module("spotrun.core.config")

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


class Ledger(RunTables, InstanceTable, EventTable, CostLineTable):
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
        super().__init__(home, clock)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = config.load_settings(self.home)
        return self._settings

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
