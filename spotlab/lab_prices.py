"""The lab's market: spot price histories per type and zone, and on-demand prices (the front
answers DescribeSpotPriceHistory and the Pricing API from them, moto_gaps.py)."""

from __future__ import annotations

from spotlab.front import AwsFront
from spotlab.regions import OTHER_ZONES, REGION, ZONES

# Spot prices the lab starts with (USD/h, per zone a, b, c): a small, realistic market.
DEFAULT_SPOT_PRICES: dict[str, tuple[float, float, float]] = {
    "c6i.large": (0.0312, 0.0334, 0.0298),
    "m6i.large": (0.0391, 0.0402, 0.0388),
    "g4dn.xlarge": (0.2271, 0.2104, 0.2390),
    "g5.xlarge": (0.4431, 0.4122, 0.4587),
    "g6.xlarge": (0.3861, 0.3702, 0.3955),
    "g5.12xlarge": (2.0153, 2.1987, 1.9721),
    "p3.2xlarge": (0.9180, 0.9480, 0.9335),
    "p4d.24xlarge": (11.8101, 12.4030, 11.9020),
}
# The other region's market: a little dearer (per zone a, b), so each region has its own.
OTHER_SPOT_PRICES: dict[str, tuple[float, float]] = {
    t: (round(p[0] * 1.07, 4), round(p[1] * 1.09, 4)) for t, p in DEFAULT_SPOT_PRICES.items()
}


class LabPrices:
    def __init__(self, front: AwsFront) -> None:
        self.front = front

    def set_defaults(self, since: float) -> None:
        """Both regions' default markets, flat from `since` (unix time)."""
        for instance_type, prices in DEFAULT_SPOT_PRICES.items():
            for zone, price in zip(ZONES, prices):
                self.set_spot(instance_type, zone, [(since, price)])
        for instance_type, other in OTHER_SPOT_PRICES.items():
            for zone, price in zip(OTHER_ZONES, other):
                self.set_spot(instance_type, zone, [(since, price)])

    def set_spot(self, instance_type: str, zone: str, points: list[tuple[float, float]]) -> None:
        """The spot price history of a type in a zone: [(unix time, USD/h), ...].

        Once any history is set, DescribeSpotPriceHistory is answered from the lab's histories
        only (a type without one has no spot market in the lab).
        """
        self.front.spot_prices.set(instance_type, zone, points)

    def set_on_demand(self, instance_type: str, usd_per_hour: float, region: str = REGION) -> None:
        """Answer the Pricing API for this type (until one is set, it answers AccessDenied)."""
        self.front.on_demand.prices[(region, instance_type)] = usd_per_hour
