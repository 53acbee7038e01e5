"""Waiting for capacity: a request that no offer fills is asked again, with backoff and jitter,
until the run's bound (--wait-for-capacity, `wait_for_capacity_s`) passes; then the run fails
with a summary of what was tried, each offer and how often it was refused.

The wait begins when the run entered REQUESTED (its last transition, so a restarted controller
keeps the same bound), and a replacement begins a new one. While it waits the run stays
REQUESTED and carries a note (spotrun.core.capacity_note) that `ls`, `status` and the
foreground view show: what it waits for and when it asks next. A stop ends the wait at once:
the pause between asks looks at the stop flag every second. The budget is looked at each ask
(Recovery.offers leaves out what the rest of it cannot pay for, and fails the run when that
is everything); nothing bills while the run waits, since nothing was filled.

The spot policy: `auto` holds its plan's on-demand offers back until the bound for spot has
passed (EC2 has said no to every spot offer for that long), then asks them after the spot
offers in the same round; the next replacement waits for spot again.
"""

from __future__ import annotations

import random
import time
from collections import Counter

from spotrun.cloud.base import Offer
from spotrun.core.capacity_note import is_waiting_note, show_note, waiting_note
from spotrun.core.durations import format_duration
from spotrun.core.errors import CapacityError
from spotrun.core.runstates import RunState
from spotrun.core.waiting import SYSTEM_CLOCK, Backoff, Clock, poll_until
from spotrun.notify.announce import announce_waiting
from spotrun.store.ledger import Ledger, RunRecord

STOP_LOOK_S = 1.0  # how often the stop flag is read while the run waits for capacity
JITTER = 0.25  # up to a quarter of each pause taken off: runs that wait together spread out


class CapacityWait:
    def __init__(
        self,
        ledger: Ledger,
        run_id: str,
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.ledger = ledger
        self.run_id = run_id
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        settings = ledger.settings
        self.backoff = Backoff(
            first_s=settings.capacity_ask_first_s,
            factor=2.0,
            max_s=max(settings.capacity_ask_first_s, settings.capacity_ask_max_s),
            jitter=JITTER,
        )
        self.asks = 0  # rounds refused in this wait
        self.refusals: Counter[str] = Counter()  # "type in zone: reason" -> times refused

    # ------------------------------------------------------------------ the bound
    def bound_s(self, run: RunRecord) -> float:
        wanted = run.spec.wait_for_capacity_s
        return self.ledger.settings.wait_for_capacity_s if wanted is None else wanted

    def began_at(self, run: RunRecord) -> float:
        """When the run began asking: its last move into REQUESTED (now if it never moved)."""
        asked = [t.at for t in self.ledger.transitions(run.id) if t.to_state is RunState.REQUESTED]
        return asked[-1] if asked else time.time()

    def spot_wait_over(self, run: RunRecord) -> bool:
        return time.time() >= self.began_at(run) + self.bound_s(run)

    # ------------------------------------------------------------------ offers
    def usable(self, run: RunRecord, offers: list[Offer]) -> list[Offer]:
        """The offers to ask this round: for `auto`, on-demand ones only once spot has been
        waited for as long as the bound allows."""
        if run.spec.spot_policy != "auto" or self.spot_wait_over(run):
            return offers
        return [o for o in offers if o.market != "on-demand"]

    # ------------------------------------------------------------------ rounds
    def refused(self, offer: Offer, reason: str) -> None:
        market = " (on-demand)" if offer.market == "on-demand" else ""
        self.refusals[f"{offer.instance_type} in {offer.zone}{market}: {reason}"] += 1

    def filled(self, run: RunRecord) -> None:
        """Capacity came: the note goes, the next wait starts afresh."""
        if self.asks:
            self.ledger.add_event(
                run.id, "capacity", f"capacity after {self.asks + 1} asks in {self._waited(run)}"
            )
        self.asks = 0
        self.refusals.clear()
        fresh = self.ledger.get_run(run.id)
        if is_waiting_note(fresh.message) and not fresh.stop_requested:
            self.ledger.set_message(run.id, None)

    def nothing_filled(self, run: RunRecord, offers: list[Offer]) -> RunRecord:
        """No offer filled this round: pause until the next ask and return the run to ask
        again, or raise CapacityError with what was tried once the bound has passed."""
        self.asks += 1
        began = self.began_at(run)
        gives_up_at = began + self.bound_s(run)
        now = time.time()
        pause_s = self.backoff.delay_s(self.asks - 1, self.rng)
        if run.spec.spot_policy == "auto" and self._on_demand_asked(offers):
            raise CapacityError(self.summary(run))  # on-demand refused too: nothing is left
        if now >= gives_up_at:
            if run.spec.spot_policy == "auto" and _plans_on_demand(run):
                return self.ledger.get_run(run.id)  # the bound passed in this round: on-demand now
            raise CapacityError(self.summary(run))
        next_ask_at = min(now + pause_s, gives_up_at)
        what = _wanted(offers, run.spec.spot_policy)
        fresh = self.ledger.get_run(run.id)
        if fresh.stop_requested:
            return fresh  # the controller stops it
        note = waiting_note(what, next_ask_at, gives_up_at)
        self.ledger.set_message(run.id, note)
        # the foreground view shows events as they come: what it waits for, the next ask
        self.ledger.add_event(run.id, "capacity", f"{show_note(note, now)} (ask {self.asks})")
        if self.asks == 1:  # told once a wait, not every ask
            announce_waiting(self.ledger, fresh, show_note(note, now))
        stopped = poll_until(
            lambda: self.ledger.state_of(run.id)[1],
            timeout_s=max(0.0, next_ask_at - time.time()),
            interval_s=min(STOP_LOOK_S, max(pause_s, 0.05)),
            clock=self.clock,
        )
        fresh = self.ledger.get_run(run.id)
        if stopped and is_waiting_note(fresh.message):  # the note landed after the stop's reason
            self.ledger.set_message(run.id, "stopped by the user")
            fresh = self.ledger.get_run(run.id)
        return fresh

    def summary(self, run: RunRecord) -> str:
        bound = format_duration(self.bound_s(run))
        tried = "; ".join(
            f"{what} ({times}x)" if times > 1 else what for what, times in self.refusals.items()
        )
        asks = f"{self.asks} ask{'s' if self.asks != 1 else ''}"
        if self.bound_s(run) <= 0:
            return f"no offer could be filled; tried {tried}"
        return f"no capacity within {bound} ({asks} in {self._waited(run)}); tried {tried}"

    def _waited(self, run: RunRecord) -> str:
        return format_duration(round(max(1.0, time.time() - self.began_at(run))))

    @staticmethod
    def _on_demand_asked(offers: list[Offer]) -> bool:
        return any(o.market == "on-demand" for o in offers)


def _plans_on_demand(run: RunRecord) -> bool:
    return run.plan is not None and any(o.market == "on-demand" for o in run.plan.offers)


def _wanted(offers: list[Offer], policy: str) -> str:
    """What the run waits for, in a few words: the types, their zones, the market."""
    types = sorted({o.instance_type for o in offers})
    zones = sorted({o.zone for o in offers})
    shown = ", ".join(types[:3]) + (f" and {len(types) - 3} more" if len(types) > 3 else "")
    where = zones[0] if len(zones) == 1 else f"{len(zones)} zones"
    market = (
        "spot, then on-demand"
        if policy == "auto"
        else ", ".join(sorted({o.market for o in offers}))
    )
    return f"{shown} in {where} ({market})"
