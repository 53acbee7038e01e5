"""What this ledger has seen of each spot pool, for ranking a launch's offers: the reclaims per
(instance type, zone) and the hours run there over the last HISTORY_DAYS."""

from __future__ import annotations

import time

from spotrun.cloud.ranking import Pool, PoolHistory
from spotrun.core.config import Settings
from spotrun.cost.rules import SPOT_INTERRUPTION_CODES
from spotrun.store.ledger import Ledger

HISTORY_DAYS = 30  # spot markets move: older reclaims say little about a pool today


def recorded_history(settings: Settings, now: float | None = None) -> dict[Pool, PoolHistory]:
    now = time.time() if now is None else now
    with Ledger(settings) as ledger:
        return ledger.pool_history(SPOT_INTERRUPTION_CODES, now - HISTORY_DAYS * 86400, now)
