"""Billing rules: what an instance's life cost, as AWS bills it, from its times and its prices.

Pure functions over exact numbers. Money is a Fraction of a dollar: a price per hour times a
number of seconds over 3,600 rarely ends in a finite decimal, so every amount stays exact and is
rounded to the cent only for display. The callers gather the inputs: instance times from the
cloud (through the ledger), price histories from the provider or the ledger's cache.

The rules (Linux/Ubuntu instances, billed per second):
- each second an instance runs costs the spot price in force at that second in its zone, over
  3,600; the price in force is the last price point at or before the second;
- an instance is billed at least 60 seconds;
- a spot instance that AWS interrupts within its first hour costs nothing, whether EC2
  terminates, stops or hibernates it; one the user (or spotrun) stops or terminates pays its
  seconds (AWS's "Billing for interrupted Spot Instances", Linux rows);
- EBS volumes cost their size times the GB-month price, per second of the calendar month they
  exist in, at least 60 seconds;
- bytes an instance reads from S3 in another region (a replacement's checkpoint, a data set)
  cost CROSS_REGION_USD_PER_GB each gigabyte, charged when they crossed.

Amounts: spotrun.cost.amounts; spot price histories: price_history; a pack instance's bill seen
from one share: share_bill; the ledger's lines of a bill: cost_lines.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Any, Literal

from spotrun.cloud.ranking import CROSS_REGION_USD_PER_GB, GB
from spotrun.core.errors import PricingError
from spotrun.core.money import show_usd
from spotrun.cost.amounts import HOUR_S
from spotrun.cost.ebs_prices import PRICES_AS_OF
from spotrun.cost.price_history import PriceHistory

MINIMUM_BILLED_S = 60  # per-second billing for Linux instances and EBS: at least a minute
FREE_INTERRUPTION_S = 3600  # AWS does not charge a spot instance it interrupts in its first hour
# EC2's state-reason codes of a spot instance EC2 interrupted: terminated, or stopped or
# hibernated (then terminated by spotrun: its compute ended at EC2's stop).
SPOT_INTERRUPTION_CODES = ("Server.SpotInstanceTermination", "Server.SpotInstanceShutdown")

TRANSFERS = "transfers"  # key in an instance record's details: the bytes it read across regions

LOCAL_METHOD = "local cloud: this machine, no charge; instance-seconds recorded"
AWS_METHOD = (
    "as AWS bills it: every second at the spot price in force in the instance's zone at that "
    "second (EC2 spot price history), 60 s minimum, nothing for a spot instance AWS interrupts "
    "in its first hour; EBS gp3 per GB-month prorated per second (AWS list prices of "
    f"{PRICES_AS_OF}); on-demand: the same seconds at the on-demand price, same storage"
)

TRANSFER_METHOD = (
    f"data transfer between regions: bytes read from S3 in another region at "
    f"{show_usd(CROSS_REGION_USD_PER_GB)}/GB (AWS's S3 pricing page, transfer out to another "
    "region)"
)

Market = Literal["spot", "on-demand", "local"]


class Ending(str, Enum):
    LIVE = "live"  # still running: priced up to now
    USER = "user"  # stopped or terminated by the user or spotrun: pays its seconds
    AWS_INTERRUPTION = "aws-interruption"  # reclaimed by AWS


def ending_of(end_reason: str | None, *, ended: bool) -> Ending:
    if not ended:
        return Ending.LIVE
    if end_reason and any(code in end_reason for code in SPOT_INTERRUPTION_CODES):
        return Ending.AWS_INTERRUPTION
    return Ending.USER


@dataclass(frozen=True)
class Volume:
    size_gb: int
    volume_type: str = "gp3"
    created_at: int | None = None  # None: created with the instance
    deleted_at: int | None = None  # None: deleted with it (DeleteOnTermination)


@dataclass(frozen=True)
class Transfer:
    """Bytes an instance read from another region, and when (billed then, whole)."""

    size_bytes: int
    source_region: str
    target_region: str
    at: int
    what: str = ""

    @property
    def usd(self) -> Fraction:
        return CROSS_REGION_USD_PER_GB * self.size_bytes / GB

    def to_detail(self) -> dict[str, Any]:
        return {
            "bytes": self.size_bytes,
            "from": self.source_region,
            "to": self.target_region,
            "at": self.at,
            "what": self.what,
        }


def transfers_of(details: Mapping[str, Any]) -> tuple[Transfer, ...]:
    """The transfers an instance record's details list (entries that do not read are left out:
    an older or damaged record bills what it can)."""
    listed = details.get(TRANSFERS)
    found = []
    for item in listed if isinstance(listed, list) else []:
        try:
            found.append(
                Transfer(
                    int(item["bytes"]),
                    str(item["from"]),
                    str(item["to"]),
                    int(item["at"]),
                    str(item.get("what", "")),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(found)


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
    transfers: tuple[Transfer, ...] = ()

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

    def transfer_until(self, at: int) -> Fraction:
        return sum((t.usd for t in self.usage.transfers if t.at < at), Fraction(0))

    def total_until(self, at: int) -> Fraction:
        return self.compute_until(at) + self.storage_until(at) + self.transfer_until(at)

    @property
    def compute(self) -> Fraction:
        return self.compute_until(self.billed_stop)

    @property
    def storage(self) -> Fraction:
        return sum((v.total for v in self.volumes), Fraction(0))

    @property
    def transfer(self) -> Fraction:
        return sum((t.usd for t in self.usage.transfers), Fraction(0))

    @property
    def transfer_bytes(self) -> int:
        return sum(t.size_bytes for t in self.usage.transfers)

    @property
    def total(self) -> Fraction:
        return self.compute + self.storage + self.transfer

    @property
    def on_demand(self) -> Fraction | None:
        return self.on_demand_until(self.usage.start + self.on_demand_s)

    @property
    def on_demand_total(self) -> Fraction | None:
        """What the same instance would have cost on demand, with the same storage and
        transfers."""
        compute = self.on_demand
        return None if compute is None else compute + self.storage + self.transfer

    @property
    def end(self) -> int:
        """The last second any charge accrues."""
        ends = [self.billed_stop, self.usage.end, *(v.stop for v in self.volumes)]
        return max([*ends, *(t.at + 1 for t in self.usage.transfers)])

    def change_points(self) -> list[int]:
        """Times between which every charge accrues at a constant rate (exact for plots/days)."""
        points = {self.usage.start, self.billed_stop, self.usage.end}
        if self.history is not None and self.billed_s:
            points |= {a for a, _, _ in self.history.segments(self.usage.start, self.billed_stop)}
        for v in self.volumes:
            points |= {v.start, v.stop, *_month_starts(v.start, v.stop)}
        points |= {edge for t in self.usage.transfers for edge in (t.at, t.at + 1)}
        return sorted(points)


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
