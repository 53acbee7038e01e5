"""Live budget enforcement: the controller's side of `--max-cost`.

At every check it bills the run so far (spotrun.cost.bills, the same exact method as `spotrun
cost`), prices each live instance at the spot price in force now, and asks spotrun.cost.budget
when stopping must begin so that checkpoint, sync and terminate all end under the cap.
The instance-side cap (the agent stopping its own instance when the controller is gone) is
separate: the agent carries the cap and the same arithmetic.
"""

from __future__ import annotations

import time
from fractions import Fraction

from spotrun.cloud.base import Offer
from spotrun.core.durations import show_duration
from spotrun.core.errors import UsageError
from spotrun.core.money import show_usd, show_usd_per_hour
from spotrun.cost import amounts, budget
from spotrun.cost import rules as cost
from spotrun.cost.bills import bill_run
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.instance_bills import volumes_of
from spotrun.cost.prices import PriceBook
from spotrun.store.ledger import InstanceRecord, Ledger, RunRecord

# A storage GB-month spread over the shortest month: the hourly rate is never understated.
SHORTEST_MONTH_H = 28 * 24


def stop_margin(ledger: Ledger) -> budget.StopMargin:
    seconds = ledger.settings.budget_stop_margin_s
    return budget.StopMargin(checkpoint_s=seconds / 3, sync_s=seconds / 3, terminate_s=seconds / 3)


def live_price(book: PriceBook, record: InstanceRecord, now: float) -> Fraction:
    if record.market == "local":
        return Fraction(0)
    if record.market == "on-demand":
        rate = book.on_demand(record.provider, record.region or "", record.instance_type)
        if rate is None:
            raise UsageError(
                f"no on-demand price is known for {record.instance_type}; a --max-cost run "
                "needs one to project its spend"
            )
        return rate
    return book.price_now(
        record.provider, record.region or "", record.zone or "", record.instance_type, now
    )


def storage_rate(record: InstanceRecord, run: RunRecord, ledger: Ledger) -> Fraction:
    total = Fraction(0)
    for volume in volumes_of(record, run, ledger.settings):
        per_month = gb_month_usd(record.region or "", volume.volume_type) * volume.size_gb
        total += per_month / SHORTEST_MONTH_H
    return total


def check(
    ledger: Ledger, run: RunRecord, book: PriceBook, now: float | None = None
) -> budget.Verdict | None:
    """The verdict for `run` now, or None when it has no cap."""
    if run.spec.max_cost_usd is None:
        return None
    at = time.time() if now is None else now
    spent = bill_run(ledger, run, book, now=at).total
    live = [
        budget.LiveInstance(
            started_at=amounts.whole_second(record.launched_at),
            usd_per_hour=live_price(book, record, at),
            storage_usd_per_hour=storage_rate(record, run, ledger),
        )
        for record in ledger.instances(run.id)
        if record.launched_at is not None and record.terminated_at is None
    ]
    return budget.decide(at, spent, amounts.usd(run.spec.max_cost_usd), live, stop_margin(ledger))


def check_affordable(cap_usd: float, offer: Offer, nodes: int, margin_s: float) -> None:
    """Refuse, before anything is created, a cap that the first minute and a stop would pass.

    Every instance bills at least a minute; with the time a stop takes on top, a cap below
    that would have the run stop as soon as it starts."""
    if offer.market == "local":
        return
    rate = amounts.usd(offer.usd_per_hour) * nodes
    least_s = cost.MINIMUM_BILLED_S + margin_s
    least = rate * Fraction(least_s) / amounts.HOUR_S
    if amounts.usd(cap_usd) < least:
        raise UsageError(
            f"--max-cost {show_usd(cap_usd)} is below what the cheapest offer costs before the "
            f"run could even stop: {nodes} x {offer.instance_type} at "
            f"{show_usd_per_hour(offer.usd_per_hour)} for {show_duration(least_s)} (the "
            f"one-minute minimum plus {show_duration(margin_s)} to stop) is {show_usd(least)}",
            hint="raise --max-cost, or choose a cheaper --instance-type",
        )
