"""Billing rules: what an instance's life cost, as AWS bills it, from its times and its prices.

Pure functions over exact numbers. Money is a Fraction of a dollar: a price per hour times a
number of seconds over 3,600 rarely ends in a finite decimal, so every amount stays exact and is
rounded to the cent only for display. The callers gather the inputs: instance times from the
cloud (through the ledger), price histories from the provider or the ledger's cache.

The rules (Linux/Ubuntu instances, billed per second):
- each second an instance runs costs the spot price in force at that second in its zone, over
  3,600; the price in force is the last price point at or before the second;
- an instance is billed at least 60 seconds;
- a spot instance that AWS interrupts within its first hour costs nothing; one the user (or
  spotrun) stops or terminates pays its seconds;
- EBS volumes cost their size times the GB-month price, per second of the calendar month they
  exist in, at least 60 seconds.
"""

from __future__ import annotations

import bisect
import calendar
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from typing import Literal

from spotrun.core.errors import PricingError
from spotrun.cost.ebs_prices import PRICES_AS_OF
from spotrun.store.ledger import CostLine

HOUR_S = 3600
MINIMUM_BILLED_S = 60  # per-second billing for Linux instances and EBS: at least a minute
FREE_INTERRUPTION_S = 3600  # AWS does not charge a spot instance it interrupts in its first hour
# EC2's state-reason code for an instance AWS terminated to reclaim spot capacity.
SPOT_INTERRUPTION_CODE = "Server.SpotInstanceTermination"

LOCAL_METHOD = "local cloud: this machine, no charge; instance-seconds recorded"
AWS_METHOD = (
    "as AWS bills it: every second at the spot price in force in the instance's zone at that "
    "second (EC2 spot price history), 60 s minimum, nothing for a spot instance AWS interrupts "
    "in its first hour; EBS gp3 per GB-month prorated per second (AWS list prices of "
    f"{PRICES_AS_OF}); on-demand: the same seconds at the on-demand price, same storage"
)

Market = Literal["spot", "on-demand", "local"]


# ------------------------------------------------------------------ money
def usd(value: float | int | str | Fraction) -> Fraction:
    """An exact amount from a price as given: a float by its shortest repr (0.3871 stays 0.3871)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PricingError(f"a price must be a finite number, got {value}")
        return Fraction(repr(value))
    return Fraction(value)


def to_cents(amount: Fraction) -> Decimal:
    """Rounded half up to the cent: the only rounding spotrun does, and only to display."""
    cents = math.floor(amount * 100 + Fraction(1, 2))
    return Decimal(cents).scaleb(-2)


def format_usd(amount: Fraction) -> str:
    value = to_cents(amount)
    return f"-${-value:,.2f}" if value < 0 else f"${value:,.2f}"


def whole_second(at: float) -> int:
    """EC2 reports times to the second; a local clock's fraction rounds to the nearest one."""
    return math.floor(at + 0.5)


def iso_utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


# ---------------------------------------------------------- price history
@dataclass(frozen=True)
class PriceHistory:
    """Spot prices of one instance type in one zone, as steps.

    Each step is (first whole second the price is in force, USD per hour); a price point stamped
    at a fraction of a second is in force from the next whole second.
    """

    instance_type: str
    zone: str
    steps: tuple[tuple[int, Fraction], ...]

    @classmethod
    def from_points(
        cls,
        instance_type: str,
        zone: str,
        points: Iterable[tuple[float, float | str | Fraction]],
    ) -> PriceHistory:
        steps: list[tuple[int, Fraction]] = []
        for at, price in sorted(points, key=lambda p: p[0]):
            second, amount = math.ceil(at), usd(price) if not isinstance(price, Fraction) else price
            if amount < 0:
                raise PricingError(f"negative spot price {price} for {instance_type} in {zone}")
            if steps and steps[-1][0] == second:
                steps[-1] = (second, amount)  # two points in one second: the later one holds
            elif not steps or steps[-1][1] != amount:
                steps.append((second, amount))
        if not steps:
            raise PricingError(
                f"the spot price history of {instance_type} in {zone} is empty",
                hint="spotrun does not price an instance it has no history for as zero",
            )
        return cls(instance_type, zone, tuple(steps))

    def _index_at(self, second: int) -> int:
        i = bisect.bisect_right(self.steps, second, key=lambda s: s[0]) - 1
        if i < 0:
            first = self.steps[0][0]
            raise PricingError(
                f"no spot price of {self.instance_type} in {self.zone} is known at "
                f"{iso_utc(second)}: the history starts at {iso_utc(first)}",
                hint="fetch the history from before the instance started",
            )
        return i

    def price_at(self, second: int) -> Fraction:
        return self.steps[self._index_at(second)][1]

    def segments(self, start: int, stop: int) -> list[tuple[int, int, Fraction]]:
        """(from, to, USD/h) pieces covering seconds [start, stop) at constant price."""
        if stop <= start:
            return []
        i = self._index_at(start)
        pieces = []
        at = start
        while at < stop:
            nxt = self.steps[i + 1][0] if i + 1 < len(self.steps) else stop
            end = min(nxt, stop)
            pieces.append((at, end, self.steps[i][1]))
            at, i = end, i + 1
        return pieces

    def integral(self, start: int, stop: int) -> Fraction:
        """USD for running seconds [start, stop): each second at the price in force then."""
        return sum(
            (Fraction((b - a)) * price / HOUR_S for a, b, price in self.segments(start, stop)),
            Fraction(0),
        )


# ----------------------------------------------------------------- usage
class Ending(str, Enum):
    LIVE = "live"  # still running: priced up to now
    USER = "user"  # stopped or terminated by the user or spotrun: pays its seconds
    AWS_INTERRUPTION = "aws-interruption"  # reclaimed by AWS


def ending_of(end_reason: str | None, *, ended: bool) -> Ending:
    if not ended:
        return Ending.LIVE
    if end_reason and SPOT_INTERRUPTION_CODE in end_reason:
        return Ending.AWS_INTERRUPTION
    return Ending.USER


@dataclass(frozen=True)
class Volume:
    size_gb: int
    volume_type: str = "gp3"
    created_at: int | None = None  # None: created with the instance
    deleted_at: int | None = None  # None: deleted with it (DeleteOnTermination)


@dataclass(frozen=True)
class Usage:
    """What one instance did: where, what, from when to when, and how it ended."""

    instance_id: str
    instance_type: str
    region: str
    zone: str
    market: Market
    start: int
    end: int
    ending: Ending
    volumes: tuple[Volume, ...] = ()

    @property
    def runtime_s(self) -> int:
        return max(0, self.end - self.start)

    @property
    def interrupted_free(self) -> bool:
        return (
            self.market == "spot"
            and self.ending is Ending.AWS_INTERRUPTION
            and self.runtime_s < FREE_INTERRUPTION_S
        )


def billed_seconds(usage: Usage) -> int:
    """Seconds of compute AWS charges for: the runtime, at least a minute; none if free."""
    if usage.interrupted_free:
        return 0
    if usage.market == "local":
        return usage.runtime_s
    return max(usage.runtime_s, MINIMUM_BILLED_S)


def gb_months(start: int, stop: int) -> Fraction:
    """Months of [start, stop): each second is 1/(seconds in its UTC calendar month)."""
    total = Fraction(0)
    at = start
    while at < stop:
        t = time.gmtime(at)
        days = calendar.monthrange(t.tm_year, t.tm_mon)[1]
        month_start = calendar.timegm((t.tm_year, t.tm_mon, 1, 0, 0, 0))
        month_end = month_start + days * 86400
        end = min(stop, month_end)
        total += Fraction(end - at, days * 86400)
        at = end
    return total


@dataclass(frozen=True)
class VolumeCharge:
    volume: Volume
    start: int
    stop: int  # billed [start, stop): at least a minute
    usd_per_gb_month: Fraction

    def until(self, at: int) -> Fraction:
        end = min(max(at, self.start), self.stop)
        return self.usd_per_gb_month * self.volume.size_gb * gb_months(self.start, end)

    @property
    def gb_months(self) -> Fraction:
        return self.volume.size_gb * gb_months(self.start, self.stop)

    @property
    def total(self) -> Fraction:
        return self.until(self.stop)


@dataclass(frozen=True)
class Bill:
    """One instance's charges, exact, and how they accrue over time."""

    usage: Usage
    billed_s: int
    history: PriceHistory | None  # spot market only
    on_demand_rate: Fraction | None  # USD/h; None when unknown
    volumes: tuple[VolumeCharge, ...]

    @property
    def billed_stop(self) -> int:
        return self.usage.start + self.billed_s

    @property
    def on_demand_s(self) -> int:
        """The seconds an on-demand instance would have been billed: no interruption waiver."""
        if self.usage.market == "local":
            return self.usage.runtime_s
        return max(self.usage.runtime_s, MINIMUM_BILLED_S)

    def compute_until(self, at: int) -> Fraction:
        stop = min(max(at, self.usage.start), self.billed_stop)
        if self.usage.market == "local" or stop <= self.usage.start:
            return Fraction(0)
        if self.history is not None:
            return self.history.integral(self.usage.start, stop)
        assert self.on_demand_rate is not None  # an on-demand bill is built only with its rate
        return self.on_demand_rate * (stop - self.usage.start) / HOUR_S

    def on_demand_until(self, at: int) -> Fraction | None:
        if self.usage.market == "local":
            return Fraction(0)
        if self.on_demand_rate is None:
            return None
        stop = min(max(at, self.usage.start), self.usage.start + self.on_demand_s)
        return self.on_demand_rate * (stop - self.usage.start) / HOUR_S

    def storage_until(self, at: int) -> Fraction:
        return sum((v.until(at) for v in self.volumes), Fraction(0))

    def total_until(self, at: int) -> Fraction:
        return self.compute_until(at) + self.storage_until(at)

    @property
    def compute(self) -> Fraction:
        return self.compute_until(self.billed_stop)

    @property
    def storage(self) -> Fraction:
        return sum((v.total for v in self.volumes), Fraction(0))

    @property
    def total(self) -> Fraction:
        return self.compute + self.storage

    @property
    def on_demand(self) -> Fraction | None:
        return self.on_demand_until(self.usage.start + self.on_demand_s)

    @property
    def on_demand_total(self) -> Fraction | None:
        """What the same instance would have cost on demand, with the same storage."""
        compute = self.on_demand
        return None if compute is None else compute + self.storage

    @property
    def end(self) -> int:
        """The last second any charge accrues."""
        return max([self.billed_stop, self.usage.end, *(v.stop for v in self.volumes)])

    def change_points(self) -> list[int]:
        """Times between which every charge accrues at a constant rate (exact for plots/days)."""
        points = {self.usage.start, self.billed_stop, self.usage.end}
        if self.history is not None and self.billed_s:
            points |= {a for a, _, _ in self.history.segments(self.usage.start, self.billed_stop)}
        for v in self.volumes:
            points |= {v.start, v.stop, *_month_starts(v.start, v.stop)}
        return sorted(points)


# ------------------------------------------------------------ shared bills
Span = tuple[int, int, Fraction]  # [from, to) and the share of the instance's charges then


@dataclass(frozen=True)
class SharedBill(Bill):
    """One tenant's part of an instance several runs share (a sweep's pack, one GPU each).

    In each span the tenant pays `share` of everything the whole instance accrues then (its
    compute at the prices in force, its volumes); spotrun.cost.shared_instances makes the
    spans so that every second of the instance's bill is split equally between the runs on it
    in that second, and the tenants' parts add up to the whole bill exactly. `usage` is the
    tenant's seat (its own time on the instance); `billed_s` its share of the instance's
    billed seconds.
    """

    whole: Bill | None = None
    spans: tuple[Span, ...] = ()

    def _part(self, until: Callable[[int], Fraction | None], at: int) -> Fraction | None:
        total = Fraction(0)
        for a, b, share in self.spans:
            if at <= a:
                break
            hi, lo = until(min(at, b)), until(a)
            if hi is None or lo is None:
                return None
            total += share * (hi - lo)
        return total

    def _whole(self) -> Bill:
        assert self.whole is not None
        return self.whole

    def compute_until(self, at: int) -> Fraction:
        part = self._part(self._whole().compute_until, at)
        assert part is not None
        return part

    def storage_until(self, at: int) -> Fraction:
        part = self._part(self._whole().storage_until, at)
        assert part is not None
        return part

    def on_demand_until(self, at: int) -> Fraction | None:
        return self._part(self._whole().on_demand_until, at)

    @property
    def billed_stop(self) -> int:
        return max((b for _, b, _ in self.spans), default=self.usage.start)

    @property
    def storage(self) -> Fraction:
        return self.storage_until(self.billed_stop)

    @property
    def on_demand(self) -> Fraction | None:
        whole = self._whole()
        return self._part(whole.on_demand_until, self.billed_stop)

    @property
    def on_demand_total(self) -> Fraction | None:
        compute = self.on_demand
        return None if compute is None else compute + self.storage

    @property
    def end(self) -> int:
        return self.billed_stop

    def change_points(self) -> list[int]:
        edges = {p for a, b, _ in self.spans for p in (a, b)}
        inner = {
            p for p in self._whole().change_points() if any(a <= p <= b for a, b, _ in self.spans)
        }
        return sorted(edges | inner)

    def lines(self, run_id: str) -> list[CostLine]:
        """Its ledger lines: its part of the compute and of the storage."""
        usage = self.usage
        method = (
            f"{AWS_METHOD}; a shared instance ({self._whole().usage.instance_id}): each second "
            f"split equally between the runs on it in that second"
        )
        on_demand = self.on_demand
        storage = self.storage
        return [
            compute_line(run_id, usage, self.billed_s, self.compute, on_demand, method),
            CostLine(
                run_id=run_id,
                instance_id=usage.instance_id,
                kind="storage",
                quantity=float(sum((share * (b - a) for a, b, share in self.spans), Fraction(0))),
                unit="shared-instance-s",
                usd=float(storage),
                on_demand_usd=float(storage),
                method=method,
                usd_exact=storage,
                on_demand_usd_exact=storage,
                start_at=float(usage.start),
                end_at=float(self.billed_stop),
            ),
        ]


def _month_starts(start: int, stop: int) -> list[int]:
    starts: list[int] = []
    t = time.gmtime(start)
    year, month = t.tm_year, t.tm_mon
    while True:
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
        at = calendar.timegm((year, month, 1, 0, 0, 0))
        if at >= stop:
            return starts
        starts.append(at)


def bill(
    usage: Usage,
    *,
    history: PriceHistory | None,
    on_demand_rate: Fraction | None,
    storage_price: Callable[[str, str], Fraction],
) -> Bill:
    """The bill of one instance. A spot instance needs its zone's history, an on-demand one its
    rate; either missing is a PricingError, never a zero."""
    billed = billed_seconds(usage)
    if usage.market == "local":
        return Bill(usage, billed, None, Fraction(0), ())
    if usage.market == "spot" and history is None and billed:
        raise PricingError(
            f"no spot price history for {usage.instance_type} in {usage.zone} "
            f"(instance {usage.instance_id})"
        )
    if usage.market == "spot" and history is not None and billed:
        history.price_at(usage.start)  # raises clearly when the history starts too late
    if usage.market == "on-demand" and on_demand_rate is None:
        raise PricingError(
            f"no on-demand price for {usage.instance_type} in {usage.region} "
            f"(instance {usage.instance_id})"
        )
    charges = []
    for volume in usage.volumes:
        start = volume.created_at if volume.created_at is not None else usage.start
        end = volume.deleted_at if volume.deleted_at is not None else usage.end
        stop = start + max(end - start, MINIMUM_BILLED_S)
        charges.append(
            VolumeCharge(volume, start, stop, storage_price(usage.region, volume.volume_type))
        )
    return Bill(
        usage,
        billed,
        history if usage.market == "spot" else None,
        on_demand_rate,
        tuple(charges),
    )


def catalog_estimate(price_usd_per_hour: Fraction, usage: Usage) -> Fraction:
    """What 'one catalog price x duration' says: the comparison the README draws."""
    return price_usd_per_hour * usage.runtime_s / HOUR_S


# ------------------------------------------------------------ cost lines
def compute_line(
    run_id: str,
    usage: Usage,
    billed_s: int,
    compute: Fraction,
    on_demand: Fraction | None,
    method: str,
) -> CostLine:
    """The ledger line of an instance's compute: whole, or a shared instance's part."""
    return CostLine(
        run_id=run_id,
        instance_id=usage.instance_id,
        kind="compute",
        quantity=float(billed_s),
        unit="instance-s",
        usd=float(compute),
        on_demand_usd=None if on_demand is None else float(on_demand),
        method=method,
        usd_exact=compute,
        on_demand_usd_exact=on_demand,
        start_at=float(usage.start),
        end_at=float(usage.end),
    )


def cost_lines(run_id: str, bill_: Bill) -> list[CostLine]:
    """The ledger's lines for one instance: compute, then one per volume."""
    if isinstance(bill_, SharedBill):
        return bill_.lines(run_id)
    usage = bill_.usage
    if usage.market == "local":
        return [
            CostLine(
                run_id=run_id,
                instance_id=usage.instance_id,
                kind="compute",
                quantity=float(usage.runtime_s),
                unit="instance-s",
                usd=0.0,
                on_demand_usd=0.0,
                method=LOCAL_METHOD,
                usd_exact=Fraction(0),
                on_demand_usd_exact=Fraction(0),
                start_at=float(usage.start),
                end_at=float(usage.end),
            )
        ]
    on_demand = bill_.on_demand
    lines = [compute_line(run_id, usage, bill_.billed_s, bill_.compute, on_demand, AWS_METHOD)]
    for charge in bill_.volumes:
        lines.append(
            CostLine(
                run_id=run_id,
                instance_id=usage.instance_id,
                kind="storage",
                quantity=float(charge.gb_months),
                unit="GB-month",
                usd=float(charge.total),
                on_demand_usd=float(charge.total),
                method=AWS_METHOD,
                usd_exact=charge.total,
                on_demand_usd_exact=charge.total,
                start_at=float(charge.start),
                end_at=float(charge.stop),
            )
        )
    return lines
