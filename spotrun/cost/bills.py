"""A run's bill: its instances as the ledger knows them, priced by spotrun.cost.rules's rules.

The ledger's instance records carry what billing needs: launch time (EC2's LaunchTime), end
time and end reason (EC2's state-transition time and state-reason code), market, zone, and in
`details["volumes"]` the EBS volumes (`size_gb`, `type`, optional `created_at`/`deleted_at`);
without that list an instance is billed one root gp3 volume of the run's disk size for its life.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spotrun.core.config import Settings
from spotrun.core.errors import PricingError
from spotrun.cost import rules as cost
from spotrun.cost.ebs_prices import gb_month_usd
from spotrun.cost.prices import PriceBook
from spotrun.store.ledger import CostLine, InstanceRecord, Ledger, RunRecord

MARKETS: tuple[cost.Market, ...] = ("spot", "on-demand", "local")


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
    def total(self) -> Fraction:
        return self.compute + self.storage

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
        return [line for b in self.bills for line in cost.cost_lines(self.run.id, b)]


def volumes_of(
    record: InstanceRecord, run: RunRecord, settings: Settings
) -> tuple[cost.Volume, ...]:
    if record.market == "local":
        return ()
    listed = record.details.get("volumes")
    if listed is None:
        size = run.spec.resources.disk_gb or settings.aws.root_volume_gb
        return (cost.Volume(size_gb=size),)
    try:
        return tuple(_volume(v) for v in listed)
    except (TypeError, KeyError, ValueError) as exc:
        raise PricingError(
            f"instance {record.id} has a malformed volume list in the ledger ({exc}): {listed!r}"
        ) from exc


def _volume(item: dict[str, Any]) -> cost.Volume:
    def second(key: str) -> int | None:
        value = item.get(key)
        return None if value is None else cost.whole_second(float(value))

    return cost.Volume(
        size_gb=int(item["size_gb"]),
        volume_type=str(item.get("type", "gp3")),
        created_at=second("created_at"),
        deleted_at=second("deleted_at"),
    )


def usage_of(
    record: InstanceRecord, run: RunRecord, settings: Settings, now: float
) -> cost.Usage | None:
    """The instance's usage, or None if it never launched (nothing to bill)."""
    if record.launched_at is None:
        return None
    if record.market not in MARKETS:
        raise PricingError(f"instance {record.id} has an unknown market '{record.market}'")
    ended = record.terminated_at is not None or run.is_terminal
    if record.terminated_at is not None:
        end = record.terminated_at
    elif run.is_terminal and run.ended_at is not None:
        end = run.ended_at  # the run ended without the instance's own end being recorded
    else:
        end = now
    start = cost.whole_second(record.launched_at)
    if record.market != "local" and not record.region:
        raise PricingError(f"instance {record.id} has no region in the ledger; cannot price it")
    return cost.Usage(
        instance_id=record.id,
        instance_type=record.instance_type,
        region=record.region or "local",
        zone=record.zone or "",
        market=record.market,  # narrowed to a Market by the check above
        start=start,
        end=max(start, cost.whole_second(end)),
        ending=cost.ending_of(record.end_reason, ended=ended),
        volumes=volumes_of(record, run, settings),
    )


def bill_run(
    ledger: Ledger, run: RunRecord, book: PriceBook, *, now: float, offline: bool = False
) -> RunBill:
    """Price every instance of `run`; live ones up to `now`. PricingError names what is missing."""
    from spotrun.cost.shared_instances import seat_bill

    bills: list[cost.Bill] = []
    for record in ledger.instances(run.id):
        shared = seat_bill(ledger, record, run, book, now=now, offline=offline)
        if shared is not None:  # a sweep trial's share of an instance it shared
            bills.append(shared)
            continue
        usage = usage_of(record, run, ledger.settings, now)
        if usage is None:
            continue
        bills.append(_bill_instance(record, usage, book, offline))
    return RunBill(run, tuple(bills), now)


def _bill_instance(
    record: InstanceRecord, usage: cost.Usage, book: PriceBook, offline: bool
) -> cost.Bill:
    if usage.market == "local":
        return cost.bill(usage, history=None, on_demand_rate=None, storage_price=gb_month_usd)
    history = None
    needs_history = usage.market == "spot" and not usage.interrupted_free
    if needs_history:
        billed_end = usage.start + cost.billed_seconds(usage)
        history = book.spot_history(
            record.provider,
            usage.region,
            usage.zone,
            usage.instance_type,
            usage.start,
            max(usage.end, billed_end),
            offline=offline,
        )
    rate = book.on_demand(record.provider, usage.region, usage.instance_type, offline=offline)
    return cost.bill(usage, history=history, on_demand_rate=rate, storage_price=gb_month_usd)
