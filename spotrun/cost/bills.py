"""A run's bill: its instances as the ledger knows them, priced by spotrun.cost.rules's rules.

The ledger's instance records carry what billing needs: launch time (EC2's LaunchTime), end
time and end reason (EC2's state-transition time and state-reason code), market, zone, and in
`details["volumes"]` the EBS volumes (`size_gb`, `type`, optional `created_at`/`deleted_at`);
without that list an instance is billed one root gp3 volume of the run's disk size for its life.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

from spotrun.core.errors import PricingError
from spotrun.cost import rules as cost
from spotrun.cost.cost_lines import cost_lines
from spotrun.cost.instance_bills import bill_instance, usage_of
from spotrun.cost.pack_shares import bill_share
from spotrun.cost.prices import PriceBook
from spotrun.cost.settled import settled_cost
from spotrun.store.ledger import CostLine, Ledger, RunRecord


@dataclass(frozen=True)
class RunBill:
    """Every instance of one run (replacements after interruptions included), priced."""

    run: RunRecord
    bills: tuple[cost.Bill, ...]
    now: float  # live instances are priced up to this moment

    @property
    def live(self) -> bool:
        return any(b.usage.ending is cost.Ending.LIVE for b in self.bills)

    @property
    def compute(self) -> Fraction:
        return sum((b.compute for b in self.bills), Fraction(0))

    @property
    def storage(self) -> Fraction:
        return sum((b.storage for b in self.bills), Fraction(0))

    @property
    def transfer(self) -> Fraction:
        return sum((b.transfer for b in self.bills), Fraction(0))

    @property
    def total(self) -> Fraction:
        return self.compute + self.storage + self.transfer

    @property
    def on_demand_total(self) -> Fraction | None:
        amounts = [b.on_demand_total for b in self.bills]
        if any(a is None for a in amounts):
            return None
        return sum((a for a in amounts if a is not None), Fraction(0))

    @property
    def instance_seconds(self) -> int:
        return sum(b.usage.runtime_s for b in self.bills)

    @property
    def methods(self) -> list[str]:
        return sorted(
            {
                cost.LOCAL_METHOD if b.usage.market == "local" else cost.AWS_METHOD
                for b in self.bills
            }
        )

    def total_until(self, at: int) -> Fraction:
        return sum((b.total_until(at) for b in self.bills), Fraction(0))

    def curve(self) -> list[tuple[int, Fraction]]:
        """(time, cumulative USD) at every point where the rate of spend changes; the spend is
        linear in between, so these points draw it exactly."""
        points = sorted({p for b in self.bills for p in b.change_points()})
        return [(p, self.total_until(p)) for p in points]

    def cost_lines(self) -> list[CostLine]:
        return [line for b in self.bills for line in cost_lines(self.run.id, b)]


def bill_run(
    ledger: Ledger, run: RunRecord, book: PriceBook, *, now: float, offline: bool = False
) -> RunBill:
    """Price every instance of `run`; live ones up to `now`. PricingError names what is missing."""
    bills: list[cost.Bill] = []
    for record in ledger.instances(run.id):
        share = bill_share(ledger, record, run, book, now=now, offline=offline)
        if share is not None:  # a sweep trial's share of a pack instance
            bills.append(share)
            continue
        usage = usage_of(record, run, ledger.settings, now)
        if usage is None:
            continue
        bills.append(bill_instance(record, usage, book, offline))
    return RunBill(run, tuple(bills), now)


def run_cost(ledger: Ledger, run: RunRecord, now: float | None = None) -> Fraction | None:
    """What the run cost, or has cost so far while it runs (priced from the ledger alone, up to
    now, with the last cached price taken to hold since the supervisor last fetched prices).
    None when it cannot be priced from what the ledger holds."""
    settled = settled_cost(ledger, run)
    if settled is not None:
        return settled
    lines = ledger.cost_lines(run.id)
    try:
        bill = bill_run(ledger, run, PriceBook(ledger), now=now or time.time(), offline=True)
    except PricingError:
        return sum((line.amount for line in lines), Fraction(0)) if lines else None
    return bill.total
