"""Spot price histories we construct (moto's is one constant), served the way EC2 serves them.

`ConstructedPrices` is a spotrun.cost.prices.PriceSource: for a request over [start, end] it returns
every change inside the span plus the last change before it, as DescribeSpotPriceHistory does,
and it records each request so tests can see what the cache saved.
"""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass, field


def utc(text: str) -> int:
    """'2025-03-10 09:00:00' (UTC) as unix seconds."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S"))


@dataclass
class ConstructedPrices:
    region: str = "us-east-1"
    spot: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)
    on_demand: dict[str, float] = field(default_factory=dict)
    requests: list[tuple[str, str, str, float, float]] = field(default_factory=list)
    on_demand_requests: list[tuple[str, str]] = field(default_factory=list)

    def add(self, zone: str, instance_type: str, points: list[tuple[float, float]]) -> None:
        self.spot.setdefault((zone, instance_type), []).extend(points)

    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[tuple[float, float]]:
        self.requests.append((region, zone, instance_type, start, end))
        if region != self.region:
            return []
        points = sorted(self.spot.get((zone, instance_type), []))
        inside = [p for p in points if start <= p[0] <= end]
        before = [p for p in points if p[0] < start]
        return before[-1:] + inside

    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        self.on_demand_requests.append((region, instance_type))
        return self.on_demand.get(instance_type) if region == self.region else None
