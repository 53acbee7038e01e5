"""The controller's watch over a run's `--max-cost`: the reason to stop now, when there is one.

Checked every `budget_check_s` (spotrun.control.budget_guard does the arithmetic). What it
tells goes to the run's events: a projection that cannot be made (no price) once, and the
expected stop when first known and whenever a price change moves it by over a minute. A
projection that cannot be made lets the run go on: the instance-side cap still holds.
"""

from __future__ import annotations

from spotrun.cloud.base import Provider
from spotrun.control import budget_guard
from spotrun.control.cost_lines import price_book
from spotrun.core.errors import SpotrunError
from spotrun.core.money import show_usd
from spotrun.core.waiting import SYSTEM_CLOCK, Clock
from spotrun.cost.budget import Action
from spotrun.store.ledger import Ledger, RunRecord

STOP_MOVE_S = 60  # a change of the expected stop worth an event


class BudgetWatch:
    def __init__(self, ledger: Ledger, provider: Provider, *, clock: Clock = SYSTEM_CLOCK):
        self.ledger = ledger
        self.provider = provider
        self.clock = clock
        self._checked_at: float | None = None
        self._note: str | None = None  # the last "not projected" event
        self._stop_at: int | None = None  # the expected stop last told
        self._said = False

    def check(self, run: RunRecord) -> str | None:
        """The reason to stop now if the run's cap would otherwise be crossed, else None."""
        if run.spec.max_cost_usd is None:
            return None
        now = self.clock.monotonic()
        if self._checked_at is not None and now - self._checked_at < (
            self.ledger.settings.budget_check_s
        ):
            return None
        self._checked_at = now
        try:
            verdict = budget_guard.check(self.ledger, run, price_book(self.ledger, self.provider))
        except SpotrunError as exc:
            note = f"budget not projected: {exc.user_message()}"
            if note != self._note:
                self.ledger.add_event(run.id, "budget", note)
            self._note = note
            return None
        if verdict is None:
            return None
        if verdict.action is Action.STOP_NOW:
            self.ledger.add_event(run.id, "budget", verdict.reason)
            return f"budget: {show_usd(run.spec.max_cost_usd)} cap; {verdict.reason}"
        last, now_at = self._stop_at, verdict.stop_at
        moved = (last is None) != (now_at is None) or (
            last is not None and now_at is not None and abs(now_at - last) > STOP_MOVE_S
        )
        if moved or not self._said:
            self.ledger.add_event(run.id, "budget", verdict.reason)
            self._stop_at, self._said = now_at, True
        self._note = None
        return None
