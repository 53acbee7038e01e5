"""Where prices come from: the PriceSource interface and the on-demand table spotrun ships.

The cost engine (spotrun/cost.py) integrates spot price histories over instance lifetimes; a
provider that can answer these two questions is a PriceSource. The AWS provider asks EC2's
DescribeSpotPriceHistory and the Pricing API; when the Pricing API cannot be reached it falls
back to the table in spotrun/data/on_demand_prices.json, which states its own date.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Protocol, runtime_checkable

# One point of a price history: (unix time the price took effect, USD per hour).
PricePoint = tuple[float, float]


@runtime_checkable
class PriceSource(Protocol):
    def spot_price_history(
        self, region: str, zone: str, instance_type: str, start: float, end: float
    ) -> list[PricePoint]:
        """Spot price changes for Linux of `instance_type` in `zone`, oldest first.

        Covers [start, end]: the first point is the price in force at `start` when the cloud
        reports it (its time is then at or before `start`). Empty when the cloud has no history.
        """
        ...

    def on_demand_price(self, region: str, instance_type: str) -> float | None:
        """The on-demand Linux price in USD per hour, or None when unknown."""
        ...


@dataclass(frozen=True)
class OnDemandTable:
    as_of: str
    source: str
    prices: dict[str, dict[str, float]]  # region -> instance type -> USD/h

    def price(self, region: str, instance_type: str) -> float | None:
        return self.prices.get(region, {}).get(instance_type)

    @property
    def label(self) -> str:
        return f"spotrun's shipped on-demand table of {self.as_of}"


@lru_cache(maxsize=1)
def shipped_table() -> OnDemandTable:
    text = resources.files("spotrun").joinpath("data/on_demand_prices.json").read_text()
    data = json.loads(text)
    return OnDemandTable(
        as_of=str(data["as_of"]),
        source=str(data["source"]),
        prices={
            region: {name: float(usd) for name, usd in table.items()}
            for region, table in data["regions"].items()
        },
    )
