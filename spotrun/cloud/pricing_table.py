"""The on-demand price table spotrun ships, for when the Pricing API cannot be asked.

It states its own date (spotrun/cloud/on_demand_prices.json); `spotrun prices` says under its
table whether the on-demand column came from the Pricing API or from this table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources


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
    text = resources.files("spotrun.cloud").joinpath("on_demand_prices.json").read_text()
    data = json.loads(text)
    return OnDemandTable(
        as_of=str(data["as_of"]),
        source=str(data["source"]),
        prices={
            region: {name: float(usd) for name, usd in table.items()}
            for region, table in data["regions"].items()
        },
    )
