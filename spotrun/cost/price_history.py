"""A spot price history: the price of one instance type in one zone, as steps in time, and what
running through it costs second by second (exact, spotrun.cost.amounts)."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from spotrun.core.errors import PricingError
from spotrun.cost.amounts import HOUR_S, iso_utc, usd


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
