"""Prices for billing: where they come from (a PriceSource, e.g. the AWS provider) and the
ledger's cache of them.

Spot price history does not change once published, so each span of it is fetched once: the
ledger records which spans it holds in full (price_coverage) beside the points themselves, and
only the gaps of a later request are fetched. The price in force when an instance starts is the
last change before it, so a request reaches back before the start (AWS also returns the last
change before the start time) and further back, up to the 90 days AWS keeps, until it finds one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol, runtime_checkable

from spotrun.core.errors import PricingError, SpotrunError
from spotrun.cost.amounts import iso_utc, usd
from spotrun.cost.price_history import PriceHistory
from spotrun.store.ledger import Ledger
from spotrun.store.price_cache import PriceCache

# How far before an instance's start a history request reaches, widened in turn until a price
# in force at the start is found; AWS keeps 90 days of spot price history.
LOOKBACKS_S = (3_600, 86_400, 7 * 86_400, 90 * 86_400)
# An on-demand price the source did not have is asked for again after this long.
ON_DEMAND_RETRY_S = 86_400


@runtime_checkable
class PriceSource(Protocol):
    """What a cloud provider offers for billing. Both calls may hit the network."""

    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[tuple[float, float]]:
        """Every spot price change in [start, end] (all pages) as (unix time, USD/hour); may
        also hold the last change before start."""
        ...

    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        """USD/hour on demand (Linux), or None when the provider does not know it."""
        ...


SourceFactory = Callable[[str], "PriceSource | None"]


def missing_spans(
    covered: list[tuple[float, float]], start: float, end: float
) -> list[tuple[float, float]]:
    """The parts of [start, end] that no covered span holds."""
    gaps = []
    at = start
    for a, b in sorted(covered):
        if b < at:
            continue
        if a > end:
            break
        if a > at:
            gaps.append((at, a))
        at = max(at, b)
        if at >= end:
            break
    if at < end:
        gaps.append((at, end))
    return gaps


class PriceBook:
    """Spot histories and on-demand prices through the ledger's cache.

    `sources` gives the PriceSource of a provider name ("aws"), or None when there is none;
    it is called only on a cache miss, so reports over cached runs never touch the network.
    """

    def __init__(
        self,
        ledger: Ledger,
        sources: SourceFactory | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.cache = PriceCache(ledger)
        self._sources = sources
        self._resolved: dict[str, PriceSource | None] = {}
        self._why_none: dict[str, str] = {}
        self.clock = clock

    def _source(self, provider: str) -> PriceSource | None:
        if provider not in self._resolved:
            source = None
            if self._sources is not None:
                try:
                    source = self._sources(provider)
                except SpotrunError as exc:  # e.g. no credentials: say so in the pricing error
                    self._why_none[provider] = exc.user_message()
            self._resolved[provider] = source
        return self._resolved[provider]

    def spot_history(
        self,
        provider: str,
        region: str,
        zone: str,
        instance_type: str,
        start: float,
        end: float,
        *,
        offline: bool = False,
    ) -> PriceHistory:
        """The history that prices [start, end]: from the last change at or before start.

        With offline, only the cache is read, and a cache that stops short of `end` is
        accepted (the last cached price is taken to hold since): live figures in `ls`.
        """
        end = max(min(end, self.clock()), start)
        key = (region, zone, instance_type)
        points: list[tuple[float, float]] = []
        for lookback in LOOKBACKS_S:
            if not offline:
                self._fill(provider, key, start - lookback, end)
            points = self.cache.price_points(*key, start=start, end=end)
            if offline or (points and points[0][0] <= start):
                break
        if not points or points[0][0] > start:
            if not offline and self._source(provider) is not None:
                if not points:
                    raise PricingError(
                        f"the spot price history of {instance_type} in {zone} ({region}) is "
                        f"empty from {iso_utc(start - LOOKBACKS_S[-1])} to {iso_utc(end)}",
                        hint="check the instance type and zone; spotrun does not price an "
                        "instance it has no history for as zero",
                    )
                raise PricingError(
                    f"no spot price of {instance_type} in {zone} ({region}) is known at or "
                    f"before {iso_utc(start)}, when the instance started",
                    hint="AWS keeps 90 days of spot price history; older instances cannot be "
                    "priced",
                )
            raise self._no_source(provider, key, (start, end))
        gaps = missing_spans(self.cache.price_coverage(*key), start, end)
        if gaps and not offline:
            raise self._no_source(provider, key, gaps[0])
        return PriceHistory.from_points(instance_type, zone, points)

    def _fill(self, provider: str, key: tuple[str, str, str], start: float, end: float) -> None:
        gaps = missing_spans(self.cache.price_coverage(*key), start, end)
        if not gaps:
            return
        source = self._source(provider)
        if source is None:
            return
        for a, b in gaps:
            points = source.spot_price_history(*key, a, b)
            self.cache.store_price_points(*key, points, covered=(a, b))

    def _no_source(
        self, provider: str, key: tuple[str, str, str], span: tuple[float, float]
    ) -> PricingError:
        region, zone, instance_type = key
        return PricingError(
            f"the ledger holds no spot price history of {instance_type} in {zone} ({region}) "
            f"for {iso_utc(span[0])} to {iso_utc(span[1])}, and no {provider} price source is "
            "at hand to fetch it"
            + (f" ({self._why_none[provider]})" if provider in self._why_none else ""),
            hint=f"run the command where spotrun can reach {provider} (credentials, network)",
        )

    def on_demand(
        self, provider: str, region: str, instance_type: str, *, offline: bool = False
    ) -> Fraction | None:
        """USD/hour on demand, or None when it is not known (the comparison is then left out)."""
        cached = self.cache.on_demand_price(region, instance_type)
        if cached is not None:
            price, fetched_at = cached
            if price is not None:
                return usd(price)
            if self.clock() - fetched_at < ON_DEMAND_RETRY_S:
                return None
        if offline:
            return None
        source = self._source(provider)
        if source is None:
            return None
        price = source.on_demand_price(region, instance_type)
        self.cache.store_on_demand_price(region, instance_type, price)
        return None if price is None else usd(price)

    def price_now(
        self, provider: str, region: str, zone: str, instance_type: str, now: float
    ) -> Fraction:
        """The spot price in force now: what a budget projects from."""
        history = self.spot_history(provider, region, zone, instance_type, now, now)
        return history.steps[-1][1]  # the latest change at or before now
