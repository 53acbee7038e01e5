"""A run's cost lines in the ledger: recomputed while it runs (every COST_REFRESH_S, its price
history fetched further each time) and once more at its end, with the same exact method as
`spotrun cost` (spotrun.cost.bills)."""

from __future__ import annotations

import time

from spotrun.cloud.base import Provider
from spotrun.core.errors import SpotrunError
from spotrun.core.waiting import SYSTEM_CLOCK, Clock
from spotrun.cost.bills import bill_run
from spotrun.cost.prices import PriceBook, PriceSource
from spotrun.store.ledger import Ledger, RunRecord

# How often a live run's cost lines are recomputed (and its price history fetched further).
COST_REFRESH_S = 300.0


def price_book(ledger: Ledger, provider: Provider) -> PriceBook:
    """The ledger's prices, fetched further from the run's own cloud when it can tell them."""

    def source(name: str) -> PriceSource | None:
        if name == provider.name and isinstance(provider, PriceSource):
            return provider
        return None

    return PriceBook(ledger, source)


class CostLines:
    def __init__(self, ledger: Ledger, provider: Provider, *, clock: Clock = SYSTEM_CLOCK):
        self.ledger = ledger
        self.provider = provider
        self.clock = clock
        self._recorded_at: float | None = None
        self._error: str | None = None

    def refresh(self, run: RunRecord) -> None:
        """Record the cost lines if COST_REFRESH_S has passed since they last were."""
        if self._recorded_at is None or self.clock.monotonic() - self._recorded_at >= (
            COST_REFRESH_S
        ):
            self.record(run)

    def record(self, run: RunRecord) -> None:
        """Recompute the run's cost lines: live instances up to now, ended ones in full.

        A cost that cannot be computed (no price history, a refused price request) is an event,
        not a failed run: the instances are already gone, and `spotrun cost` computes it again
        when it can."""
        self._recorded_at = self.clock.monotonic()
        book = price_book(self.ledger, self.provider)
        try:
            bill = bill_run(self.ledger, self.ledger.get_run(run.id), book, now=time.time())
        except SpotrunError as exc:  # no history, or the cloud refused the price request
            message = f"cost not computed: {exc.user_message()}"
            if message != self._error:
                self.ledger.add_event(run.id, "cost", message)
            self._error = message
            return
        self._error = None
        self.ledger.replace_cost_lines(run.id, bill.cost_lines())
